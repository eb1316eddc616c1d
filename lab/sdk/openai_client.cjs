// The lab's openai npm client (the `openai` package, a Stainless client, installed by the
// test with npm): chat completions and the model list in turn, through a gateway, with the
// client's own retries (maxRetries 2) and a per-attempt timeout. Every HTTP attempt the
// client makes goes through its fetch option and is recorded as a JSON line, as lab/sdk's
// sdkclient records the Go SDKs': the client's own record, the lab's truth.
//
// node openai_client.cjs --modules DIR --base URL --name NAME --for SECONDS --workers N --timeout S --out FILE
'use strict';
const fs = require('fs');
const path = require('path');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const { OpenAI } = require(path.join(args.modules, 'openai'));
const out = fs.openSync(args.out, 'w');

// now is the time since the epoch in nanoseconds, to the microsecond.
const now = () => Math.round((performance.timeOrigin + performance.now()) * 1000) * 1000;

// recordingFetch sends an attempt and records it; the body is read whole here, so that a
// timeout while reading it is this attempt's.
async function recordingFetch(url, init) {
  const h = new Headers(init.headers);
  const a = {
    sdk: 'openai-node', call: h.get('x-lab-call'), op: h.get('x-lab-op'),
    n: Number(h.get('x-stainless-retry-count') || 0), sent: now(), status: 0,
  };
  try {
    const resp = await fetch(url, init);
    const body = await resp.arrayBuffer();
    a.status = resp.status;
    const ram = resp.headers.get('retry-after-ms');
    if (ram) a.retry_after_ms = Number(ram);
    a.end = now();
    fs.writeSync(out, JSON.stringify(a) + '\n');
    return new Response(resp.status === 204 ? null : body, { status: resp.status, statusText: resp.statusText, headers: resp.headers });
  } catch (e) {
    a.end = now();
    fs.writeSync(out, JSON.stringify(a) + '\n');
    throw e;
  }
}

async function main() {
  const client = new OpenAI({
    apiKey: 'lab', baseURL: args.base + '/v1', maxRetries: 2,
    timeout: Number(args.timeout) * 1000, fetch: recordingFetch,
  });
  const deadline = Date.now() + Number(args.for) * 1000;
  let next = 0;
  const worker = async () => {
    while (Date.now() < deadline) {
      const i = next++;
      const id = `${args.name}-${String(i).padStart(5, '0')}`;
      const op = i % 2 === 1 ? 'models' : 'chat';
      const headers = { 'X-Lab-Call': id, 'X-Lab-Op': op };
      try {
        if (op === 'models') {
          await client.models.list({ headers });
        } else {
          await client.chat.completions.create({ model: 'lab-1', user: id, messages: [{ role: 'user', content: 'hi' }] }, { headers });
        }
      } catch (e) {
        // the record says how it went
      }
    }
  };
  await Promise.all(Array.from({ length: Number(args.workers) }, worker));
  fs.closeSync(out);
}

main().catch((e) => { console.error(e); process.exit(1); });
