# infir2 orchestrator image: the compiled CLI plus the pre-bundled workflow code. docker-compose.yml runs it as
# the orchestrator worker (`infir2 worker`: workflows only, no pool); it also serves the read-only verbs
# (`validate`, `plan`, `status`, `cancel`). It holds no training software: GPU workers run `infir2 worker
# --pool NAME` inside the InfiR2 image on the GPU nodes (docs/cluster.md).
#
#   docker build -t infir2:0.1.0 .        (docker compose build does the same)

FROM node:20.20.2-bookworm-slim AS build
# The same absolute path as the checkout on the GPU nodes (docs/cluster.md): a compiled plan names files of
# the infir2 tree (src/backends/tools/) by absolute path.
WORKDIR /opt/infir2
# Dependencies first, so that a source change does not reinstall them. `npm install` rather than `npm ci`:
# npm 11 writes lock files without other platforms' optional native packages and `npm ci` then refuses them;
# install still takes the locked versions (scripts/setup.sh does the same).
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund --loglevel=error
COPY tsconfig.json ./
COPY bin ./bin
COPY scripts ./scripts
COPY src ./src
# scripts/build.sh: tsc to dist/, then the workflow bundle (dist/workflow-bundle.js) so that the worker polls
# at once on start. It needs the dev dependencies (typescript); they are dropped afterwards.
RUN bash scripts/build.sh \
 && test -f dist/cli/main.js \
 && test -f dist/workflow-bundle.js \
 && npm prune --omit=dev --no-audit --no-fund --loglevel=error
COPY recipes ./recipes

FROM node:20.20.2-bookworm-slim
ENV NODE_ENV=production
WORKDIR /opt/infir2
COPY --from=build /opt/infir2 /opt/infir2
USER node
ENTRYPOINT ["node", "bin/infir2.js"]
CMD ["--help"]
