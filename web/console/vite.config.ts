// The console's build: Vite (Rolldown) bundles src/ into the gateway's
// embedded directory services/gateway/console/dist, served at /console/.
// Hashed file names (content hashes: the same source gives the same bytes),
// one chunk for React and the app, one for ECharts loaded on demand.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../../services/gateway/console/dist", import.meta.url));

export default defineConfig({
  base: "/console/",
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
