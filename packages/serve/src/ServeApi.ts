/**
 * The server's JSON routes as an `HttpApi`: the one definition the handlers
 * implement, the OpenAPI document (`/doc`) describes, and a typed client
 * (`HttpApiClient.make(ServeApi)`) can call.
 *
 * Paths and shapes are opencode's legacy surface (see SERVE.md), so that
 * opencode's own clients drive it. The SSE routes (`/event`,
 * `/global/event`) are not here: they stream, and live on the router beside
 * the API.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Canonical } from "@skein/protocol"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------
// Errors: opencode's body `{name, data: {message}}`, one class per status
// ---------------------------------------------------------------------------

const ErrorData = Schema.Struct({ message: Schema.String })

/**
 * opencode's error bodies carry `name`, not `_tag`, so these are classes
 * discriminated by a `name` literal rather than tagged errors; the handlers
 * map the registry's tagged errors onto them.
 */
export class BadRequest extends Schema.Class<BadRequest>("BadRequest")(
  { name: Schema.tag("BadRequest"), data: ErrorData },
  HttpApiSchema.annotations({ status: 400, description: "The body, path or query failed its schema" })
) {}

export class NotFoundError extends Schema.Class<NotFoundError>("NotFoundError")(
  { name: Schema.tag("NotFoundError"), data: ErrorData },
  HttpApiSchema.annotations({ status: 404, description: "No such session, message, permission or question" })
) {}

export class DirectoryRejected extends Schema.Class<DirectoryRejected>("DirectoryRejected")(
  { name: Schema.tag("DirectoryRejected"), data: ErrorData },
  HttpApiSchema.annotations({ status: 403, description: "`directory` is outside the server's roots" })
) {}

export class UnknownError extends Schema.Class<UnknownError>("UnknownError")(
  { name: Schema.tag("UnknownError"), data: ErrorData },
  HttpApiSchema.annotations({ status: 500, description: "The session could not be started or driven" })
) {}

export class PayloadTooLarge extends Schema.Class<PayloadTooLarge>("PayloadTooLarge")(
  { name: Schema.tag("PayloadTooLarge"), data: ErrorData },
  HttpApiSchema.annotations({ status: 413, description: "The body is larger than the route takes" })
) {}

export const badRequest = (message: string) => new BadRequest({ data: { message } })
export const notFound = (message: string) => new NotFoundError({ data: { message } })

// ---------------------------------------------------------------------------
// The request's directory
// ---------------------------------------------------------------------------

/** The request's `directory` (query, `location[directory]` or `x-opencode-directory`), checked against the roots. */
export class Directory extends Context.Tag("@skein/serve/ServeApi/Directory")<Directory, string>() {}

/** Resolves and confines `directory` on every route of the API. */
export class DirectoryGuard extends HttpApiMiddleware.Tag<DirectoryGuard>()("@skein/serve/ServeApi/DirectoryGuard", {
  failure: DirectoryRejected,
  provides: Directory
}) {}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

export const Session = Schema.Struct({
  ...Canonical.SessionInfo.fields,
  slug: Schema.String,
  projectID: Schema.String,
  /** skein: the CLI's own session UUID. */
  cliSessionId: Schema.String
}).annotations({ identifier: "Session" })

export const Message = Schema.Struct({
  info: Canonical.MessageInfo,
  parts: Schema.Array(Canonical.Part)
}).annotations({ identifier: "MessageWithParts" })

export const Todo = Schema.Struct({ content: Schema.String, status: Schema.String, priority: Schema.String })
  .annotations({ identifier: "Todo" })

/**
 * Text and file parts reach the CLI (a file as an image, a PDF or a text
 * document; see `promptContent`); other part types are accepted and left out.
 */
export const FilePartInput = Schema.Struct({
  type: Schema.Literal("file"),
  mime: Schema.String,
  url: Schema.String,
  filename: Schema.optional(Schema.String)
})

export const PromptBody = Schema.Struct({
  messageID: Schema.optional(Schema.String),
  model: Schema.optional(Canonical.ModelRef),
  agent: Schema.optional(Schema.String),
  noReply: Schema.optional(Schema.Boolean),
  system: Schema.optional(Schema.String),
  parts: Schema.Array(Schema.Union(
    Schema.Struct({ type: Schema.Literal("text"), text: Schema.String, synthetic: Schema.optional(Schema.Boolean) }),
    FilePartInput,
    Schema.Struct({ type: Schema.String })
  ))
}).annotations({ identifier: "PromptBody" })

export const CreateBody = Schema.Struct({ title: Schema.optional(Schema.String), parentID: Schema.optional(Schema.String) })
export const UpdateBody = Schema.Struct({ title: Schema.optional(Schema.String) })
export const ForkBody = Schema.Struct({ messageID: Schema.optional(Schema.String) })
export const SummarizeBody = Schema.Struct({
  providerID: Schema.optional(Schema.String),
  modelID: Schema.optional(Schema.String),
  auto: Schema.optional(Schema.Boolean)
})
export const PermissionReplyBody = Schema.Struct({ reply: Canonical.PermissionReply, message: Schema.optional(Schema.String) })
export const LegacyPermissionBody = Schema.Struct({ response: Canonical.PermissionReply })
/** One answer per question, each the labels chosen (or typed). */
export const QuestionReplyBody = Schema.Struct({ answers: Schema.Array(Schema.Array(Schema.String)) })

/** Startup answers whose shape is opencode's and whose content is Claude Code's: documented, passed through. */
const Opaque = Schema.Unknown.annotations({ description: "opencode's shape for this route" })

const sessionPath = Schema.Struct({ sessionID: Schema.String })
const requestPath = Schema.Struct({ requestID: Schema.String })

// ---------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------

const opaque = <const Name extends string>(name: Name, path: HttpApiEndpoint.PathSegment) =>
  HttpApiEndpoint.get(name, path).addSuccess(Opaque)

export class Discovery extends HttpApiGroup.make("discovery")
  .add(HttpApiEndpoint.get("health", "/global/health").addSuccess(Schema.Struct({ healthy: Schema.Boolean, version: Schema.String })))
  .add(opaque("config", "/config"))
  .add(opaque("configProviders", "/config/providers"))
  .add(opaque("provider", "/provider"))
  .add(opaque("providerAuth", "/provider/auth"))
  .add(opaque("agent", "/agent"))
  .add(opaque("command", "/command"))
  .add(opaque("path", "/path"))
  .add(opaque("vcs", "/vcs"))
  .add(opaque("lsp", "/lsp"))
  .add(opaque("mcp", "/mcp"))
  .add(opaque("formatter", "/formatter"))
  .add(opaque("projectCurrent", "/project/current"))
  .add(opaque("projectDirectories", "/project/global/directories"))
  .add(opaque("capabilities", "/experimental/capabilities"))
  .add(opaque("console", "/experimental/console"))
  .add(opaque("workspace", "/experimental/workspace"))
  .add(opaque("workspaceStatus", "/experimental/workspace/status"))
  .add(opaque("resource", "/experimental/resource"))
  .annotate(OpenApi.Description, "What the clients ask at startup, answered for Claude Code")
{}

/** The 1.18 TUI's `/api/*` lists: `{location, data}`. */
export class Locations extends HttpApiGroup.make("locations")
  .add(opaque("location", "/api/location"))
  .add(opaque("models", "/api/model"))
  .add(opaque("providers", "/api/provider"))
  .add(opaque("agents", "/api/agent"))
  .add(opaque("commands", "/api/command"))
  .add(opaque("skills", "/api/skill"))
  .add(opaque("references", "/api/reference"))
  .add(opaque("integrations", "/api/integration"))
{}

export class Sessions extends HttpApiGroup.make("sessions")
  .addError(BadRequest)
  .addError(NotFoundError)
  .addError(UnknownError)
  .add(HttpApiEndpoint.get("list", "/session").addSuccess(Schema.Array(Session)))
  .add(HttpApiEndpoint.post("create", "/session").setPayload(CreateBody).addSuccess(Session))
  .add(HttpApiEndpoint.get("status", "/session/status").addSuccess(Schema.Record({ key: Schema.String, value: Canonical.SessionStatus })))
  .add(HttpApiEndpoint.get("get", "/session/:sessionID").setPath(sessionPath).addSuccess(Session))
  .add(
    HttpApiEndpoint.patch("update", "/session/:sessionID").setPath(sessionPath).setPayload(UpdateBody).addSuccess(Session)
  )
  .add(
    HttpApiEndpoint.del("remove", "/session/:sessionID").setPath(sessionPath).addSuccess(Schema.Boolean)
      .annotate(OpenApi.Description, "Stops the live session and archives its transcript out of the listing")
  )
  .add(HttpApiEndpoint.get("children", "/session/:sessionID/children").setPath(sessionPath).addSuccess(Schema.Array(Session)))
  .add(HttpApiEndpoint.get("todo", "/session/:sessionID/todo").setPath(sessionPath).addSuccess(Schema.Array(Todo)))
  .add(HttpApiEndpoint.get("diff", "/session/:sessionID/diff").setPath(sessionPath).addSuccess(Schema.Array(Schema.Unknown)))
  .add(
    HttpApiEndpoint.post("fork", "/session/:sessionID/fork").setPath(sessionPath).setPayload(ForkBody).addSuccess(Session)
      .annotate(OpenApi.Description, "A branch of the transcript before `messageID` (all of it without), as a new session")
  )
  .add(
    HttpApiEndpoint.post("summarize", "/session/:sessionID/summarize").setPath(sessionPath).setPayload(SummarizeBody)
      .addSuccess(Schema.Boolean)
      .annotate(OpenApi.Description, "Runs the CLI's own `/compact` as a turn")
  )
  .add(HttpApiEndpoint.post("abort", "/session/:sessionID/abort").setPath(sessionPath).addSuccess(Schema.Boolean))
{}

export class Messages extends HttpApiGroup.make("messages")
  .addError(BadRequest)
  .addError(NotFoundError)
  .addError(UnknownError)
  .add(
    HttpApiEndpoint.get("list", "/session/:sessionID/message").setPath(sessionPath)
      // A string, read leniently: a bad `limit` is ignored rather than answered with another error shape.
      .setUrlParams(Schema.Struct({ limit: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Array(Message))
      .annotate(OpenApi.Description, "The history; `limit` keeps the latest n messages")
  )
  .add(
    HttpApiEndpoint.get("get", "/session/:sessionID/message/:messageID")
      .setPath(Schema.Struct({ sessionID: Schema.String, messageID: Schema.String }))
      .addSuccess(Message)
  )
  .add(
    HttpApiEndpoint.post("prompt", "/session/:sessionID/message").setPath(sessionPath).setPayload(PromptBody).addSuccess(Message)
      .annotate(OpenApi.Description, "Holds the connection until the turn's authoritative end")
  )
  .add(
    HttpApiEndpoint.post("promptAsync", "/session/:sessionID/prompt_async").setPath(sessionPath).setPayload(PromptBody)
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Description, "Queues behind a busy session, wakes a stopped one; the id is in `x-skein-message-id`")
  )
{}

export class Permissions extends HttpApiGroup.make("permissions")
  .addError(BadRequest)
  .addError(NotFoundError)
  .addError(UnknownError)
  .add(HttpApiEndpoint.get("list", "/permission").addSuccess(Schema.Array(Canonical.PermissionRequest)))
  .add(
    HttpApiEndpoint.post("reply", "/permission/:requestID/reply").setPath(requestPath).setPayload(PermissionReplyBody)
      .addSuccess(Schema.Boolean)
  )
  .add(
    HttpApiEndpoint.post("legacyReply", "/session/:sessionID/permissions/:permissionID")
      .setPath(Schema.Struct({ sessionID: Schema.String, permissionID: Schema.String })).setPayload(LegacyPermissionBody)
      .addSuccess(Schema.Boolean)
  )
{}

export class Questions extends HttpApiGroup.make("questions")
  .addError(BadRequest)
  .addError(NotFoundError)
  .addError(UnknownError)
  .add(HttpApiEndpoint.get("list", "/question").addSuccess(Schema.Array(Canonical.QuestionRequest)))
  .add(
    HttpApiEndpoint.post("reply", "/question/:requestID/reply").setPath(requestPath).setPayload(QuestionReplyBody)
      .addSuccess(Schema.Boolean)
  )
  .add(HttpApiEndpoint.post("reject", "/question/:requestID/reject").setPath(requestPath).addSuccess(Schema.Boolean))
{}

export class ServeApi extends HttpApi.make("skein")
  .add(Discovery)
  .add(Locations)
  .add(Sessions)
  .add(Messages)
  .add(Permissions)
  .add(Questions)
  .middleware(DirectoryGuard)
  .addError(PayloadTooLarge)
  .annotate(OpenApi.Title, "skein serve")
  .annotate(OpenApi.Description, "opencode's HTTP surface over Claude Code sessions. Every route needs the token (bearer, or basic auth with it as the password).")
{}
