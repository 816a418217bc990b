#!/usr/bin/env bash
# Compile the TypeScript to dist/ and pre-bundle the workflow code (so a worker polls at once on start).
set -euo pipefail
cd "$(dirname "$0")/.."
npx --no-install tsc -p tsconfig.json
node --input-type=module -e "const m = await import('./dist/workers/workflow-bundle.js'); await m.writePrebuiltBundle();"
