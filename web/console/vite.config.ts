// The console's build: Vite (Rolldown) bundles src/ into the gateway's
// embedded directory services/gateway/console/dist, served at /console/.
// Hashed file names (content hashes: the same source gives the same bytes),
// one chunk for React and the app, one for ECharts loaded on demand.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../../services/gateway/console/dist", import.meta.url));

// `npm run dev` serves the source with live reload and sends the API's
// routes to a running gateway (make run's, or BAAGENT_GATEWAY's): the
// console then talks to the same public API as when the gateway serves it.
const gateway = process.env.BAAGENT_GATEWAY ?? "http://127.0.0.1:7780";

export default defineConfig({
  base: "/console/",
  server: {
    host: "127.0.0.1",
    strictPort: false,
    proxy: { "/v1": { target: gateway, ws: true } },
  },
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir,
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    reportCompressedSize: false,
    // No inline module-preload polyfill script: the CSP allows none.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    // The chart chunk (ECharts) is large but loaded only when a chart shows.
    chunkSizeWarningLimit: 600,
  },
});
