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

/** Characters of a server's text kept in an error message (and so in a record's `meta.error`). */
export const SERVER_TEXT_CHARS = 500;

/**
 * A server's error body or explanation as it may be quoted: at most `max` characters, then a note of
 * the original length, so a hostile or broken server cannot fill messages and records.
 */
export function clipServerText(text: string, max = SERVER_TEXT_CHARS): string {
  return text.length > max ? `${text.slice(0, max)}…[clipped: ${text.length} chars in all]` : text;
}
