'use strict';
/**
 * BullMQ adapter: delayed jobs through `Queue.add(name, data, {delay, jobId})`,
 * bulk through `Queue.addBulk`, and BullMQ's own `Worker` at concurrency 4.
 *
 * Runs in Node with the packages of package-lock.json (bullmq 6.7.0 on
 * ioredis 5.11.1), installed under bench/.venvs/bullmq. The same interface as
 * the Python adapters (bench/peers/systems/README.md), in Node's spelling:
 * `QUEUE`, `version()`, `Client` (`bulk`, `ready()`, `enqueue()`,
 * `enqueueMany()`, `close()`, all async) and `workerArgv(node, store)`.
 * BullMQ has no worker CLI: a worker is a `new Worker(...)` in a script of
 * one's own, so `node peer_bullmq.js` is the worker: BullMQ's defaults except
 * a concurrency of 4, closed gracefully on SIGTERM (see notes/bullmq.md).
 */

const { Queue, Worker } = require('bullmq');
const { record } = require('./jobbody');

const QUEUE = 'bench';
const BATCH = 1000; // jobs per addBulk call, as chronoq's put_many

/** ioredis options for a `redis://host:port/db` store URL. */
function connection(store) {
  const url = new URL(store);
  const db = Number(url.pathname.slice(1) || 0);
  return { host: url.hostname, port: Number(url.port || 6379), db };
}

function version() {
  return `bullmq ${require('bullmq/package.json').version}`;
}

/**
 * Job options for a job due at `due` (epoch seconds, on whole ms). BullMQ has
 * only a relative delay: the job is due at its `timestamp` (creation time,
 * Date.now() by default) + `delay`, both whole ms. The adapter takes Date.now()
 * once, computes the delay from it and gives that same instant as the
 * timestamp, so the job is due exactly at `due` (in a bulk call, BullMQ would
 * otherwise take its timestamp a little later than the delay was computed).
 */
function options(jobId, due) {
  const now = Date.now();
  return { jobId, timestamp: now, delay: Math.max(0, Math.round(due * 1000) - now) };
}

class Client {
  static bulk = true; // addBulk: one pipeline of the same per-job scripts

  constructor(store) {
    this.queue = new Queue(QUEUE, { connection: connection(store) });
  }

  async ready() {
    await this.queue.waitUntilReady();
  }

  async enqueue(jobId, due) {
    await this.queue.add('run', { id: jobId, due }, options(jobId, due));
  }

  async enqueueMany(jobs) {
    for (let first = 0; first < jobs.length; first += BATCH) {
      const batch = jobs.slice(first, first + BATCH).map(([jobId, due]) => ({
        name: 'run',
        data: { id: jobId, due },
        opts: options(jobId, due),
      }));
      await this.queue.addBulk(batch);
    }
  }

  async close() {
    await this.queue.close();
  }
}

function workerArgv(node, store) {
  // The store reaches the worker through $BENCH_STORE.
  return [node, __filename];
}

function work() {
  const worker = new Worker(QUEUE, async job => record(job.data.id, job.data.due), {
    connection: connection(process.env.BENCH_STORE),
    concurrency: 4,
  });
  worker.on('error', err => console.error(err));
  const stop = async () => {
    await worker.close(); // waits for the running jobs
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (require.main === module) {
  work();
}

module.exports = { QUEUE, Client, version, workerArgv };
