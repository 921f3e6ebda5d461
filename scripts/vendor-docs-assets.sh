#!/usr/bin/env bash
# Re-vendor the API docs assets (Swagger UI, ReDoc) from the npm registry into app/web/static/vendor/.
# Run by hand when upgrading (the files are committed; nothing here runs at install or test time).
#   bash scripts/vendor-docs-assets.sh [SWAGGER_UI_VERSION] [REDOC_VERSION]
set -euo pipefail
SWAGGER=${1:-5.35.0}
REDOC=${2:-2.5.4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/app/web/static/vendor
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
npm pack --silent "swagger-ui-dist@$SWAGGER" "redoc@$REDOC" >/dev/null
mkdir sw rd
tar xzf "swagger-ui-dist-$SWAGGER.tgz" -C sw
tar xzf "redoc-$REDOC.tgz" -C rd
mkdir -p "$DEST/swagger-ui" "$DEST/redoc"
cp sw/package/{swagger-ui-bundle.js,swagger-ui-bundle.js.LICENSE.txt,swagger-ui.css,LICENSE,NOTICE} "$DEST/swagger-ui/"
cp rd/package/LICENSE rd/package/bundles/{redoc.standalone.js,redoc.standalone.js.LICENSE.txt} "$DEST/redoc/"
# ReDoc's sidebar shows a logo from its CDN; an empty inline SVG keeps the page free of remote requests.
sed -i 's#"https://cdn.redoc.ly/redoc/logo-mini.svg"#"data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"#' \
  "$DEST/redoc/redoc.standalone.js"
if grep -q 'cdn.redoc.ly' "$DEST/redoc/redoc.standalone.js"; then
  echo "the ReDoc bundle still references its CDN: update the substitution above" >&2
  exit 1
fi
sha256sum "swagger-ui-dist-$SWAGGER.tgz" "redoc-$REDOC.tgz"
echo "vendored swagger-ui-dist $SWAGGER and redoc $REDOC into $DEST; update $DEST/README.md and app/web/apidocs.py"
