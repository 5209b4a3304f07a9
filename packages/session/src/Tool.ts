/**
 * A host-defined tool: an Effect the model can call, served to the CLI by an
 * in-process MCP server (see `Toolkit`).
 *
 * The input schema is the tool's contract twice over: its JSON Schema is what
 * the model sees, and the CLI's arguments are decoded by it, so bad arguments
 * go back to the model as a tool error that names the field. Failures,
 * defects and timeouts are tool errors too: nothing a tool does throws into
 * the session, and the CLI always gets an answer.
 */
import type { Json } from "@skein/protocol"
import { Cause, Duration, Effect, JSONSchema, ParseResult, Predicate, Schema, type Types } from "effect"

export const TypeId: unique symbol = Symbol.for("@skein/session/Tool")
export type TypeId = typeof TypeId

/** A failure a tool reports to the model: its message becomes an error result. */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

/** One MCP content block of a tool result. */
export type Content =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image"; readonly data: string; readonly mimeType: string }

/** What `tools/call` answers: MCP's `CallToolResult`. */
export interface Result {
  readonly [TypeId]: TypeId
  readonly content: ReadonlyArray<Content>
  readonly isError: boolean
}

export const isResult = (u: unknown): u is Result => Predicate.hasProperty(u, TypeId)

export const result = (content: ReadonlyArray<Content>, options?: { readonly isError?: boolean | undefined }): Result => ({
  [TypeId]: TypeId,
  content,
  isError: options?.isError ?? false
})

export const text = (value: string): Result => result([{ type: "text", text: value }])

/** A JSON value, pretty-printed as text: the model reads it as it would any tool output. */
export const json = (value: unknown): Result => text(JSON.stringify(value, null, 2) ?? "null")

/** An image as a base64 content block (`data` without the `data:` prefix). */
export const image = (data: string | Uint8Array, mimeType: string): Result =>
  result([{ type: "image", data: typeof data === "string" ? data : Buffer.from(data).toString("base64"), mimeType }])

/** An error result: the model sees `message` and knows the call failed. */
export const error = (message: string): Result => result([{ type: "text", text: message }], { isError: true })

/** The JSON-RPC form of a result. */
export const toJson = (r: Result): Json.JsonObject => ({
  content: r.content.map((c): Json.JsonObject => ({ ...c })),
  ...(r.isError ? { isError: true } : {})
})

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

/** How a tool is listed in `tools/list`. */
export interface Definition {
  readonly name: string
  readonly description: string
  readonly inputSchema: Json.JsonObject
}

/** Default bound on one call; past it the model gets an error and the run is interrupted. */
export const defaultTimeout: Duration.Duration = Duration.minutes(2)

/** A tool whose run needs `R`, which the layer that provides its toolkit supplies. */
export interface Tool<out R> {
  readonly [TypeId]: { readonly _R: Types.Covariant<R> }
  readonly name: string
  readonly definition: Definition
  readonly timeout: Duration.Duration
  /** Decodes the arguments, runs, encodes the output; never fails. Interruptible. */
  readonly call: (args: unknown) => Effect.Effect<Result, never, R>
}

/** The requirements of a tool (or of a union of tools). */
export type Context<T> = T extends Tool<infer R> ? R : never

interface Common<I, II> {
  /** As the model sees it; `mcp__<server>__<name>` in the CLI. */
  readonly name: string
  readonly description: string
  /** A struct schema: its JSON Schema is the tool's `inputSchema`, and it decodes the arguments. */
  readonly input: Schema.Schema<I, II>
  readonly timeout?: Duration.DurationInput | undefined
}

/** A schema's JSON Schema without `$schema`, as the CLI passes it on to the model API. */
export const jsonSchema = <I, II>(schema: Schema.Schema<I, II>): Json.JsonObject => {
  const { $schema: _, ...rest } = JSONSchema.make(schema)
  return rest
}

/**
 * MCP lists a tool's input as an object schema, and the CLI drops a tool
 * whose schema is anything else: an empty struct (which JSONSchema.make
 * renders as "object or array") becomes `{type: "object"}`, a class's `$ref`
 * is resolved at the top.
 */
const inputSchemaOf = <I, II>(name: string, schema: Schema.Schema<I, II>): Json.JsonObject => {
  const root = jsonSchema(schema)
  if (root["type"] === "object") return root
  const ref = root["$ref"]
  const defs = root["$defs"]
  if (typeof ref === "string" && ref.startsWith("#/$defs/") && Predicate.isRecord(defs)) {
    const target = defs[decodeURIComponent(ref.slice("#/$defs/".length))]
    if (Predicate.isRecord(target) && target["type"] === "object") return { ...target, $defs: defs }
  }
  const anyOf = root["anyOf"]
  if (Array.isArray(anyOf) && anyOf.some((branch) => Predicate.isRecord(branch) && branch["type"] === "object" && Object.keys(branch).length === 1)) {
    return { type: "object", properties: {} }
  }
  throw new globalThis.Error(`Tool.make: the input of ${name} must be a struct schema (its JSON Schema is ${JSON.stringify(root)})`)
}

/** `id: Expected number, actual "x"`, one line per problem. */
export const formatIssues = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => issue.path.length === 0 ? issue.message : `${issue.path.map(String).join(".")}: ${issue.message}`)
    .join("\n")

const failureText = (name: string, cause: Cause.Cause<ToolError>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") return failure.value.message
  const defect = Cause.squash(cause)
  return `${name} failed unexpectedly: ${defect instanceof globalThis.Error ? defect.message : String(defect)}`
}

/**
 * A tool. With `output`, `run` returns that schema's type and the model gets
 * its encoded JSON; without, `run` returns text or a `Result` (images,
 * several blocks, an explicit error).
 */
export function make<I, II, O, OI, R = never>(options: Common<I, II> & {
  readonly output: Schema.Schema<O, OI>
  readonly run: (input: I) => Effect.Effect<O, ToolError, R>
}): Tool<R>
export function make<I, II, R = never>(options: Common<I, II> & {
  readonly output?: undefined
  readonly run: (input: I) => Effect.Effect<string | Result, ToolError, R>
}): Tool<R>
export function make<I, II, O, OI, R>(options: Common<I, II> & {
  readonly output?: Schema.Schema<O, OI> | undefined
  readonly run: (input: I) => Effect.Effect<unknown, ToolError, R>
}): Tool<R> {
  const { name, output } = options
  const timeout = Duration.decode(options.timeout ?? defaultTimeout)
  const decode = Schema.decodeUnknown(options.input, { errors: "all", onExcessProperty: "ignore" })
  const render = (value: unknown): Effect.Effect<Result> => {
    if (output !== undefined) {
      return Schema.encodeUnknown(output)(value).pipe(
        Effect.map(json),
        Effect.catchAll((e) => Effect.succeed(error(`${name} returned output its schema rejects:\n${formatIssues(e)}`)))
      )
    }
    return Effect.succeed(isResult(value) ? value : text(typeof value === "string" ? value : JSON.stringify(value)))
  }
  const call = (args: unknown): Effect.Effect<Result, never, R> =>
    decode(args ?? {}).pipe(
      Effect.matchEffect({
        onFailure: (e) => Effect.succeed(error(`Invalid arguments for ${name}:\n${formatIssues(e)}`)),
        onSuccess: (input) =>
          options.run(input).pipe(
            Effect.flatMap(render),
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause) ? Effect.interrupt : Effect.succeed(error(failureText(name, cause)))
            ),
            Effect.timeoutTo({
              duration: timeout,
              onSuccess: (r) => r,
              onTimeout: () => error(`${name} timed out after ${Duration.format(timeout)}`)
            })
          )
      }),
      Effect.withSpan("Tool.call", { attributes: { tool: name } })
    )
  return {
    [TypeId]: { _R: (_: never) => _ },
    name,
    definition: { name, description: options.description, inputSchema: inputSchemaOf(name, options.input) },
    timeout,
    call
  }
}
