'use strict';
/**
 * The producer side of a system under test that runs in Node (BullMQ), as
 * bench/peers/driver.py is for the Python ones: the same verbs, run by
 * bench/peers/run.py, and the same one-line JSON answers.
 *
 *     node driver.js SYSTEM describe
 *     node driver.js SYSTEM enqueue PLAN {single|bulk}
 *     node driver.js SYSTEM worker-argv NODE
 *
 * `SYSTEM` names the adapter module `peer_<SYSTEM>.js` beside this file.
 * `PLAN` is a JSON file `{"jobs": [[id, due], ...]}`. `enqueue` puts every
 * job through one call each of the system's delayed API (`single`) or through
 * its bulk API (`bulk`), timed here, in Node, then prints when it started and
 * finished (epoch seconds, sub-ms) and how many jobs. Node built-ins only,
 * besides the adapter.
 */

const fs = require('node:fs');
const path = require('node:path');
const { now } = require('./jobbody');

function print(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

async function main(argv) {
  const [system, verb] = argv;
  const adapter = require(path.join(__dirname, `peer_${system}.js`));
  if (verb === 'describe') {
    print({ version: adapter.version(), bulk: Boolean(adapter.Client.bulk) });
    return;
  }
  if (verb === 'worker-argv') {
    print(adapter.workerArgv(argv[2], process.env.BENCH_STORE));
    return;
  }
  const plan = JSON.parse(fs.readFileSync(argv[2], 'utf8'));
  const jobs = plan.jobs.map(([jobId, due]) => [String(jobId), Number(due)]);
  const client = new adapter.Client(process.env.BENCH_STORE);
  let started;
  let finished;
  try {
    await client.ready(); // connected, as the Python clients are once built
    started = now();
    if (argv[3] === 'bulk') {
      await client.enqueueMany(jobs);
    } else {
      for (const [jobId, due] of jobs) {
        await client.enqueue(jobId, due);
      }
    }
    finished = now();
  } finally {
    await client.close();
  }
  print({ started, finished, n: jobs.length });
}

main(process.argv.slice(2)).catch(err => {
  console.error(err);
  process.exit(1);
});
