/**
 * The stream-json bus as streams: stdout bytes to decoded messages and
 * diagnostics, host messages to stdin bytes.
 */
import type * as Stream from "effect/Stream"
import * as CliMessage from "./CliMessage.js"
import * as HostMessage from "./HostMessage.js"
import * as Lenient from "./Lenient.js"
import * as Ndjson from "./Ndjson.js"

/**
 * The flags that put the CLI on the bus: stream-json both ways, and
 * `--verbose`, which stream-json output requires.
 */
export const busArgs: ReadonlyArray<string> = [
  "-p",
  "--output-format",
  "stream-json",
  "--input-format",
  "stream-json",
  "--verbose"
]

/** Decode the CLI's stdout. Never fails on bad data; only if `self` fails. */
export const decodeStdout = <E, R>(
  self: Stream.Stream<Uint8Array, E, R>,
  options?: Ndjson.FrameOptions
): Stream.Stream<Lenient.Decoded<CliMessage.CliMessage>, E, R> => Lenient.decodeStream(self, CliMessage.decoder, options)

/** Decode the CLI's stdout a read at a time, for a reader that pulls the bytes itself. */
export const stdoutDecoder = (options?: Ndjson.FrameOptions): Lenient.Incremental<CliMessage.CliMessage> =>
  Lenient.incremental(CliMessage.decoder, options)

/** Decode what a host wrote to stdin (captures, proxies, FakeCli). */
export const decodeStdin = <E, R>(
  self: Stream.Stream<Uint8Array, E, R>,
  options?: Ndjson.FrameOptions
): Stream.Stream<Lenient.Decoded<HostMessage.HostMessage>, E, R> => Lenient.decodeStream(self, HostMessage.decoder, options)

/** Encode host messages for the CLI's stdin, one JSON object per line. */
export const encodeStdin: <E, R>(
  self: Stream.Stream<HostMessage.HostMessage, E, R>
) => Stream.Stream<Uint8Array, E, R> = Ndjson.pack
