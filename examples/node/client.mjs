// A client of chronoq's HTTP API (`chronoq serve`) for Node 20+, with no
// dependencies: the global fetch. It covers what a producer and a consumer
// need (put, reserve, ack, nack, touch); the rest of the API is the same
// pattern, see /openapi.json on the server. Times are ms since the epoch,
// durations seconds, as in the Python API.

export class ChronoqError extends Error {
  // status: the HTTP status (0 when the server could not be reached);
  // code: the server's error code ("lease_lost", "invalid_job", ...);
  // index: the offending job of a batch, for "invalid_job".
  constructor(message, { status = 0, code = "", index = undefined } = {}) {
    super(message);
    this.name = "ChronoqError";
    this.status = status;
    this.code = code;
    this.index = index;
  }
}

export class Client {
  constructor(baseUrl = "http://127.0.0.1:7070", { token, timeout = 10 } = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.timeout = timeout; // seconds; a long poll waits its `wait` more
  }

  // put(topic, payload, {delay, runAt, id, priority, ttr, maxAttempts,
  // uniqueFor, replace}) -> {id, created, due_at}. A Uint8Array (or Buffer)
  // payload travels base64-encoded; anything else as JSON. runAt: a Date or
  // epoch seconds. Without an id the server makes one, and a second put
  // makes a second job: give an id to make a retried put safe.
  async put(topic, payload = null, options = {}) {
    const body = { ...jobOptions(options), ...payloadFields(payload) };
    if (options.replace) body.replace = true;
    return this.#call("POST", `${topicPath(topic)}/jobs`, body);
  }

  // reserve(topic, {count, wait, ttr}) -> jobs, each with id, payload,
  // attempts, lease, deadline, ...: answered as soon as a job is due, or []
  // after `wait` seconds (at most the server's max_wait, 60 s by default).
  async reserve(topic, { count = 1, wait = 0, ttr } = {}) {
    const body = { count, wait };
    if (ttr !== undefined) body.ttr = ttr;
    const answer = await this.#call("POST", `${topicPath(topic)}/reserve`, body, wait);
    return answer.jobs.map(decodeJob);
  }

  // ack/nack/touch take a job from reserve: its topic, id and lease. A lease
  // that ran out (or was taken over) throws ChronoqError with code "lease_lost".
  async ack(job) {
    await this.#call("POST", `${jobPath(job)}/ack`, { lease: job.lease });
  }

  // nack(job, {delay, error}) -> "delayed" | "ready" | "dead"; without a
  // delay, the server's exponential backoff.
  async nack(job, { delay, error } = {}) {
    const body = { lease: job.lease };
    if (delay !== undefined) body.delay = delay;
    if (error !== undefined) body.error = String(error);
    return (await this.#call("POST", `${jobPath(job)}/nack`, body)).state;
  }

  // touch(job, {ttr}) -> the new deadline (ms).
  async touch(job, { ttr } = {}) {
    const body = { lease: job.lease };
    if (ttr !== undefined) body.ttr = ttr;
    return (await this.#call("POST", `${jobPath(job)}/touch`, body)).deadline;
  }

  async #call(method, path, body, wait = 0) {
    const headers = { "content-type": "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let response;
    try {
      response = await fetch(this.baseUrl + path, {
        method,
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout((this.timeout + wait) * 1000),
      });
    } catch (err) {
      // Not sent again here: a put without an id or a reserve whose answer
      // was lost must not be repeated blindly (a second job, or leased jobs
      // that come back only when their lease runs out).
      throw new ChronoqError(
        `no answer from the chronoq server at ${this.baseUrl} to ${method} ${path}: ` +
          `${err.cause?.message ?? err.message}; is \`chronoq serve\` running there?`,
      );
    }
    const text = await response.text();
    let answer;
    try {
      answer = JSON.parse(text);
    } catch {
      throw new ChronoqError(`${this.baseUrl} answered ${response.status} without JSON`, {
        status: response.status,
      });
    }
    if (!response.ok) {
      const { code = "", message = text, index } = answer.error ?? {};
      throw new ChronoqError(message, { status: response.status, code, index });
    }
    return answer;
  }
}

function segment(value) {
  // A job id may hold "/", "?", "#"...: encodeURIComponent escapes them. The
  // ids "." and ".." cannot be sent in a path by fetch at all (the WHATWG URL
  // parser reads them, even as %2E%2E, as path steps): refuse them clearly.
  if (value === "." || value === "..") {
    throw new ChronoqError(`the id ${JSON.stringify(value)} cannot be named in a URL by fetch`);
  }
  return encodeURIComponent(value);
}

function topicPath(topic) {
  return `/v1/topics/${segment(topic)}`;
}

function jobPath(job) {
  return `${topicPath(job.topic)}/jobs/${segment(job.id)}`;
}

function jobOptions({ delay, runAt, id, priority, ttr, maxAttempts, uniqueFor }) {
  const body = {};
  if (delay !== undefined) body.delay = delay;
  if (runAt !== undefined) body.run_at = runAt instanceof Date ? runAt.getTime() / 1000 : runAt;
  if (id !== undefined) body.id = id;
  if (priority !== undefined) body.priority = priority;
  if (ttr !== undefined) body.ttr = ttr;
  if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
  if (uniqueFor !== undefined) body.unique_for = uniqueFor;
  return body;
}

function payloadFields(payload) {
  if (payload instanceof Uint8Array) {
    return { payload_b64: Buffer.from(payload).toString("base64") };
  }
  return payload === null || payload === undefined ? {} : { payload };
}

function decodeJob(job) {
  if (job.payload_b64 === undefined) return job;
  const { payload_b64: b64, ...rest } = job;
  return { ...rest, payload: Buffer.from(b64, "base64") };
}
