#!/usr/bin/env node
// Example BA-Agent ToolProvider server in Node.js (proto/baagent/v1/
// toolprovider.proto): the same tools as ../go, served with @grpc/grpc-js.
//
//   npm ci --prefix examples/toolprovider/node
//   node examples/toolprovider/node/server.js [--addr 127.0.0.1:7791] [--rates-file rates.json] [--proto-dir proto]
//
// It prints `listening on HOST:PORT` on stdout once it serves and stops
// gracefully on SIGINT or SIGTERM. Register it in the toolrunner's tools file:
//
//   providers:
//     - name: finance-node
//       address: 127.0.0.1:7791
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { toolList, defaultRates, checkRates, ToolError } from './tools.js';
import { toStruct, toValue, fromStruct } from './struct.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opts } = parseArgs({
  options: {
    addr: { type: 'string', default: '127.0.0.1:7791' },
    'rates-file': { type: 'string' },
    'proto-dir': { type: 'string', default: resolve(here, '../../../proto') },
  },
});

function log(level, msg, attrs = {}) {
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...attrs }) + '\n');
}

const rates = opts['rates-file'] ? checkRates(JSON.parse(readFileSync(opts['rates-file'], 'utf8'))) : defaultRates;
const tools = toolList(rates);

const definition = protoLoader.loadSync('baagent/v1/toolprovider.proto', {
  includeDirs: [opts['proto-dir']],
  keepCase: true,
  enums: String,
  longs: Number,
  defaults: false,
  oneofs: true,
});
const baagent = grpc.loadPackageDefinition(definition).baagent.v1;

const definitions = tools.map((t) => ({
  schema: { name: t.name, description: t.description, parameters: toStruct(t.parameters) },
  version: '1.0.0',
  read_only: true,
  cache_policy: 'TOOL_CACHE_POLICY_TTL_MEDIUM',
  default_timeout_ms: 5000,
}));

const errorResponse = (kind, code, message) => ({ error: { type: `TOOL_ERROR_TYPE_${kind}`, code, message } });

const service = {
  DescribeTools(_call, callback) {
    callback(null, { tools: definitions });
  },
  // A bad request (no tool name) is an RPC error; a tool failure, including
  // bad arguments, is a typed ToolError in the response.
  ExecuteTool(call, callback) {
    const req = call.request;
    if (!req.tool_name) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: 'tool_name: required' });
      return;
    }
    const t = tools.find((x) => x.name === req.tool_name);
    if (!t) {
      callback(null, errorResponse('NOT_FOUND', 'UNKNOWN_TOOL', `this provider has no tool ${req.tool_name.slice(0, 40)}`));
      return;
    }
    const started = Date.now();
    try {
      const data = t.run(fromStruct(req.parameters));
      log('INFO', 'tool call', { tool: t.name, tool_call_id: req.tool_call_id, attempt: req.attempt ?? 0, ok: true, duration_ms: Date.now() - started });
      callback(null, { data: toValue(data) });
    } catch (err) {
      log('INFO', 'tool call', { tool: t.name, tool_call_id: req.tool_call_id, ok: false, error: err.message });
      if (err instanceof ToolError) callback(null, errorResponse(err.kind, err.code, err.message));
      else callback(null, errorResponse('INTERNAL_ERROR', 'INTERNAL', err.message));
    }
  },
};

const server = new grpc.Server();
server.addService(baagent.ToolProviderService.service, service);
server.bindAsync(opts.addr, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    log('ERROR', 'cannot listen', { addr: opts.addr, error: err.message });
    process.exit(1);
  }
  const host = opts.addr.slice(0, opts.addr.lastIndexOf(':'));
  process.stdout.write(`listening on ${host}:${port}\n`);
  log('INFO', 'tool provider serving', { addr: `${host}:${port}`, rates_as_of: rates.as_of });
});

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    const force = setTimeout(() => server.forceShutdown(), 5000);
    server.tryShutdown(() => { clearTimeout(force); process.exit(0); });
  });
}
