# tablegraph's container image: one image for the servers and the workers (see docs/deploy.md).
#   docker build -t tablegraph .
#   docker run -p 4000:4000 -e TABLEGRAPH_STORAGE_ACCOUNT_URL=… -e TABLEGRAPH_JWKS_URL=… tablegraph
#   docker run --no-healthcheck -e TABLEGRAPH_STORAGE_ACCOUNT_URL=… tablegraph node dist/src/cli/worker.js
# test/container-layout.test.ts builds the final stage's layout from this file's COPY lines and starts it.

# Compiles the TypeScript (with the development dependencies: typescript).
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY schema ./schema
COPY src ./src
COPY examples ./examples
RUN npm run build

# The production dependencies only: no Azurite, no TypeScript, no test tools.
FROM node:20-slim AS production-dependencies
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=4000
WORKDIR /app
COPY --from=production-dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY schema ./schema
COPY examples ./examples
# The node image's unprivileged user: the process can write nothing of the app's files.
USER node
EXPOSE 4000
# The worker has no HTTP port: run it with --no-healthcheck (or the platform's own probes). /livez makes no storage
# call: a storage outage marks no container unhealthy (src/server/probes.ts).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM: in-flight requests and messages in hand finish, then the process exits (src/cli/run-main.ts).
STOPSIGNAL SIGTERM
CMD ["node", "--enable-source-maps", "dist/src/cli/start.js"]
