/** Base of every error a model client throws; `url` names the endpoint that failed. */
export class ModelError extends Error {
  override name = "ModelError";
  constructor(
    message: string,
    readonly url: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The server answered with a non-2xx status. `serverMessage` is its own explanation, when it gave one. */
export class ModelHttpError extends ModelError {
  override name = "ModelHttpError";
  constructor(
    readonly method: string,
    url: string,
    readonly status: number,
    readonly serverMessage: string,
    readonly attempts: number,
  ) {
    super(
      `${method} ${url} failed with HTTP ${status}${serverMessage ? `: ${serverMessage}` : ""}${attemptsNote(attempts)}`,
      url,
    );
  }
}

/** No usable answer arrived: connection refused or reset, DNS failure, or the per-request timeout. */
export class ModelConnectionError extends ModelError {
  override name = "ModelConnectionError";
  constructor(
    readonly method: string,
    url: string,
    readonly timedOut: boolean,
    detail: string,
    readonly attempts: number,
    options?: ErrorOptions,
  ) {
    super(`${method} ${url}: ${detail}${attemptsNote(attempts)}`, url, options);
  }
}

/** A 2xx answer whose body is not the JSON we expect (malformed, or a field missing or mistyped). */
export class ModelResponseError extends ModelError {
  override name = "ModelResponseError";
}

const attemptsNote = (attempts: number) => (attempts > 1 ? ` (after ${attempts} attempts)` : "");
