// The official MCP TypeScript SDK's client against a toolbox served by
// package mcptools (the Go test binary named by TOOLRELAY_MCP_SERVER,
// which serves when TOOLRELAY_MCP_SERVE says how): over stdio and over
// streamable HTTP, it lists the tools and calls them as a JavaScript
// program would. Any deviation the SDK notices fails a test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const server = process.env.TOOLRELAY_MCP_SERVER;
if (!server) throw new Error('TOOLRELAY_MCP_SERVER must name the Go test binary that serves the toolbox');

// startHTTP runs the server over streamable HTTP and returns its URL and a
// stop function.
function startHTTP() {
  const child = spawn(server, [], { env: { ...process.env, TOOLRELAY_MCP_SERVE: 'http' }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`server exited with ${code} before it was ready`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/URL=(\S+)/);
      if (m) resolve({ url: m[1], stop: () => child.kill() });
    });
  });
}

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('|');
}

// exercise lists and calls the served tools through client.
async function exercise(client) {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['get_weather', 'leak', 'picture', 'refund']);
  const weather = tools.find((t) => t.name === 'get_weather');
  assert.equal(weather.description, 'Gets the weather in a city.');
  assert.equal(weather.inputSchema.type, 'object');
  assert.ok(weather.inputSchema.properties.city, 'get_weather has a city property');
  assert.equal(weather.annotations?.readOnlyHint, true);

  let res = await client.callTool({ name: 'get_weather', arguments: { city: 'Seattle' } });
  assert.equal(res.isError ?? false, false);
  assert.equal(text(res), '70f and rainy');

  res = await client.callTool({ name: 'get_weather', arguments: { city: 'Paris' } });
  assert.equal(res.isError, true);
  assert.equal(text(res), 'no weather for Paris');

  res = await client.callTool({ name: 'get_weather', arguments: { city: 7 } });
  assert.equal(res.isError, true);
  assert.match(text(res), /invalid arguments for tool "get_weather": city/);

  res = await client.callTool({ name: 'leak', arguments: {} });
  assert.equal(res.isError, true);
  assert.equal(text(res), 'tool "leak" failed');
  assert.doesNotMatch(JSON.stringify(res), /hunter2/);

  res = await client.callTool({ name: 'refund', arguments: {} });
  assert.equal(res.isError, true);
  assert.match(text(res), /needs a person's approval/);

  res = await client.callTool({ name: 'picture', arguments: {} });
  assert.equal(res.content[0].text, 'here:');
  assert.equal(res.content[1].type, 'image');
  assert.equal(res.content[1].mimeType, 'image/png');
  assert.equal(Buffer.from(res.content[1].data, 'base64').toString(), 'png!');
}

test('stdio: the toolbox is listed and called', async () => {
  const transport = new StdioClientTransport({ command: server, args: [], env: { ...process.env, TOOLRELAY_MCP_SERVE: 'stdio' }, stderr: 'inherit' });
  const client = new Client({ name: 'node-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    await exercise(client);
  } finally {
    await client.close();
  }
});

test('streamable HTTP: the toolbox is listed and called', async () => {
  const { url, stop } = await startHTTP();
  const client = new Client({ name: 'node-test', version: '1.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    await exercise(client);
    await client.close();
  } finally {
    stop();
  }
});
