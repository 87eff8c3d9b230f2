'use strict';
/**
 * The one job body, as bench/peers/jobbody.py for the Python systems: note
 * when it started.
 *
 * Node built-ins only. Each call appends one line `<job id> <due> <start>`
 * (epoch seconds) to the file named by $BENCH_RECORD, with one O_APPEND
 * write, which Linux keeps whole beside the other writers. The start is
 * `performance.timeOrigin + performance.now()`: wall time with sub-ms
 * precision (Date.now() keeps whole ms), read as the job body starts.
 */

const fs = require('node:fs');
const { performance } = require('node:perf_hooks');

let fd = null;

/** Epoch seconds, sub-ms: the driver's clock too. */
function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

function record(jobId, due) {
  const started = now();
  if (fd === null) {
    fd = fs.openSync(process.env.BENCH_RECORD, 'a', 0o644); // O_WRONLY | O_APPEND | O_CREAT
  }
  fs.writeSync(fd, `${jobId} ${due} ${started}\n`);
}

module.exports = { now, record };
