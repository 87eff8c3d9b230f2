// The chronoq round trip from Node: put a job due in 1 s, long-poll for it,
// ack it, and print one JSON line with what happened.
//
//   chronoq serve &                 # http://127.0.0.1:7070
//   node examples/node/demo.mjs     # or CHRONOQ_URL=... CHRONOQ_TOKEN=... node ...

import { Client } from "./client.mjs";

const client = new Client(process.env.CHRONOQ_URL ?? "http://127.0.0.1:7070", {
  token: process.env.CHRONOQ_TOKEN,
});
const topic = process.env.CHRONOQ_TOPIC ?? "node.demo";
const id = `demo-${Date.now()}`;

const put = await client.put(topic, { hello: "from node" }, { id, delay: 1 });
const started = Date.now();
const jobs = await client.reserve(topic, { wait: 10 }); // returns when the job is due
const waitedMs = Date.now() - started;
const job = jobs.find((j) => j.id === id);
if (job === undefined) {
  console.error(`no job ${id} within 10 s (got ${jobs.length} others)`);
  process.exit(1);
}
await client.ack(job);

let ackedTwice = "no error";
try {
  await client.ack(job); // its lease ended with the first ack
} catch (err) {
  ackedTwice = err.code;
}

console.log(
  JSON.stringify({
    topic,
    id,
    created: put.created,
    due_at: put.due_at,
    payload: job.payload,
    attempts: job.attempts,
    waited_ms: waitedMs,
    acked: true,
    second_ack: ackedTwice,
  }),
);
