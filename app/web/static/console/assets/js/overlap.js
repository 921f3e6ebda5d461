// Rows of a scored file equal to rows of a version's training file (the service's `training_overlap` block), read
// against chance: rows from the same source are equal now and then where features take few values, about as often
// as the training file's own rows repeat one another (`training_repeated_rows`).

/** The share of new rows from the training file's source expected to equal a training row. */
export function chanceShare(o) {
  return o?.training_rows ? (o.training_repeated_rows || 0) / o.training_rows : 0;
}

/** Whether more of `n` scored rows equal training rows than chance explains (over three standard deviations above). */
export function beyondChance(o, n) {
  if (!(o?.rows > 0) || !(n > 0)) return false;
  const p = chanceShare(o);
  return o.rows > n * p + 3 * Math.sqrt(n * p * (1 - p)) + 0.5;
}
