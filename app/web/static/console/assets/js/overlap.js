// Rows of a scored file equal to rows of a version's training file (the service's `training_overlap` block), read
// against chance: rows from the same source are equal now and then where features take few values, about as often
// as the training file's own rows repeat one another (`training_repeated_rows`).

/** The share of new rows from the training file's source expected to equal a training row. */
export function chanceShare(o) {
  return o?.training_rows ? (o.training_repeated_rows || 0) / o.training_rows : 0;
}

/**
 * Whether more of `n` scored rows equal training rows than chance explains: over three standard deviations above the
 * chance count, the share smoothed ((repeats + 1) / (rows + 1): a small training file without repeats is not proof
 * that new rows never repeat) and its own uncertainty counted (the n / training_rows term).
 */
export function beyondChance(o, n) {
  if (!(o?.rows > 0) || !(n > 0) || !(o.training_rows > 0)) return false;
  const p = ((o.training_repeated_rows || 0) + 1) / (o.training_rows + 1);
  const sd = Math.sqrt(n * p * (1 - p) * (1 + n / o.training_rows));
  return o.rows > n * p + 3 * sd + 0.5;
}
