/**
 * OpenTelemetry tracing for skein. Off unless one of these layers is provided: without it the
 * spans skein opens go to Effect's built-in tracer, which exports nothing.
 *
 * @since 0.1.0
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import type { Attributes } from "@opentelemetry/api"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, type SpanExporter, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Arr from "effect/Array"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/** The `service.name` skein reports when neither the options nor `OTEL_SERVICE_NAME` name one. */
export const defaultServiceName = "skein"

/**
 * How an embedder sends skein's spans somewhere. Processors are used as given; each exporter is
 * wrapped in a `BatchSpanProcessor`, so exporting never runs on a session's fiber.
 *
 * @since 0.1.0
 */
export interface Options {
  readonly spanProcessors?: SpanProcessor | ReadonlyArray<SpanProcessor> | undefined
  readonly exporters?: SpanExporter | ReadonlyArray<SpanExporter> | undefined
  /** Default: `OTEL_SERVICE_NAME`, else `skein`. */
  readonly serviceName?: string | undefined
  readonly serviceVersion?: string | undefined
  readonly attributes?: Attributes | undefined
  /** How long shutdown may spend flushing the last spans (default 3 s). */
  readonly shutdownTimeout?: Duration.DurationInput | undefined
}

/**
 * Installs an OpenTelemetry tracer for everything it is provided to. Spans are flushed and the
 * provider shut down when the layer's scope closes.
 *
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<never> =>
  NodeSdk.layer(Effect.map(serviceNameFromEnv(options.serviceName), (serviceName) => ({
    spanProcessor: [
      ...Arr.ensure(options.spanProcessors ?? []),
      ...Arr.map(Arr.ensure(options.exporters ?? []), (exporter) => new BatchSpanProcessor(exporter))
    ],
    resource: {
      serviceName,
      ...(options.serviceVersion === undefined ? {} : { serviceVersion: options.serviceVersion }),
      ...(options.attributes === undefined ? {} : { attributes: options.attributes })
    },
    ...(options.shutdownTimeout === undefined ? {} : { shutdownTimeout: options.shutdownTimeout })
  })))

/** The resource's attributes override the environment's, so the name from the environment is read here. */
const serviceNameFromEnv = (given: string | undefined): Effect.Effect<string> =>
  given !== undefined
    ? Effect.succeed(given)
    : Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault(defaultServiceName), Effect.orDie)

/**
 * @since 0.1.0
 */
export interface OtlpOptions {
  /**
   * The collector. A bare origin (`http://localhost:4318`) gets the standard `/v1/traces` path;
   * a URL with a path is used as it is.
   */
  readonly url: string
  readonly serviceName?: string | undefined
  readonly headers?: Record<string, string> | undefined
}

/**
 * Sends spans to an OTLP/HTTP (JSON) collector: what `skein serve --otel <url>` provides. The
 * exporter is made when the layer is built, not when this is called.
 *
 * @since 0.1.0
 */
export const layerOtlp = (options: OtlpOptions): Layer.Layer<never> =>
  Layer.suspend(() =>
    layer({
      exporters: new OTLPTraceExporter({
        url: tracesEndpoint(options.url),
        ...(options.headers === undefined ? {} : { headers: options.headers })
      }),
      serviceName: options.serviceName
    })
  )

/** Appends the OTLP traces path to a bare origin. */
export const tracesEndpoint = (url: string): string => {
  const parsed = URL.canParse(url) ? new URL(url) : undefined
  if (parsed === undefined || (parsed.pathname !== "/" && parsed.pathname !== "")) return url
  parsed.pathname = "/v1/traces"
  return parsed.toString()
}

/**
 * OTLP from the standard environment, off when it names no collector:
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
 * URL, `/v1/traces` appended), and `OTEL_SERVICE_NAME`.
 *
 * @since 0.1.0
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.gen(function*() {
    const traces = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    const base = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT"))
    const url = Option.orElse(traces, () => Option.map(base, (b) => `${b.replace(/\/+$/, "")}/v1/traces`))
    return Option.match(url, { onNone: () => Layer.empty, onSome: (url) => layerOtlp({ url }) })
  })
)
