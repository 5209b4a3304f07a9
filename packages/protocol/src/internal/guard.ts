/**
 * Non-allocating guards compiled from schema ASTs, for the decode hot path.
 *
 * `ParseResult.is` builds an output value as it checks (a fresh object per
 * struct, a fresh array per array), so validating a stream of messages spends
 * much of its time in the garbage collector. The wire schemas are plain data
 * shapes, and for those a guard needs no output at all. This compiles the AST
 * node kinds the wire schemas use into plain predicates with the same meaning
 * as `ParseResult.is` (excess properties allowed, an optional property may be
 * absent); any other node falls back to `ParseResult.is` for that node alone.
 * A test checks the two agree on real captures and on fuzzed lines.
 */
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"

export type Guard = (u: unknown) => boolean

const compiled = new WeakMap<AST.AST, Guard>()

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const fallback = (ast: AST.AST): Guard => {
  const is = ParseResult.is(Schema.make(ast))
  return (u) => is(u)
}

const noOptions: AST.ParseOptions = {}

const build = (ast: AST.AST): Guard => {
  switch (ast._tag) {
    case "StringKeyword":
      return (u) => typeof u === "string"
    case "NumberKeyword":
      return (u) => typeof u === "number"
    case "BooleanKeyword":
      return (u) => typeof u === "boolean"
    case "UnknownKeyword":
    case "AnyKeyword":
      return () => true
    case "UndefinedKeyword":
      return (u) => u === undefined
    case "Literal": {
      const literal = ast.literal
      return (u) => u === literal
    }
    case "Refinement": {
      const from = guardOf(ast.from)
      return (u) => from(u) && Option.isNone(ast.filter(u, noOptions, ast))
    }
    case "Suspend": {
      let inner: Guard | undefined
      return (u) => (inner ??= guardOf(ast.f()))(u)
    }
    case "Union": {
      const members = ast.types.map(guardOf)
      return (u) => {
        for (const member of members) if (member(u)) return true
        return false
      }
    }
    case "TupleType": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return fallback(ast)
      const element = guardOf(ast.rest[0]!.type)
      return (u) => {
        if (!Array.isArray(u)) return false
        for (const x of u) if (!element(x)) return false
        return true
      }
    }
    case "TypeLiteral": {
      if (ast.indexSignatures.some((s) => s.parameter._tag !== "StringKeyword")) return fallback(ast)
      if (ast.propertySignatures.some((p) => typeof p.name !== "string")) return fallback(ast)
      const properties = ast.propertySignatures.map((p) => ({
        name: String(p.name),
        isOptional: p.isOptional,
        guard: guardOf(p.type)
      }))
      const indexes = ast.indexSignatures.map((s) => guardOf(s.type))
      const names = new Set(properties.map((p) => p.name))
      return (u) => {
        if (!isRecord(u)) return false
        for (const p of properties) {
          if (!Object.hasOwn(u, p.name)) {
            if (p.isOptional) continue
            return false
          }
          if (!p.guard(u[p.name])) return false
        }
        if (indexes.length > 0) {
          for (const key of Object.keys(u)) {
            if (names.has(key)) continue
            for (const index of indexes) if (!index(u[key])) return false
          }
        }
        return true
      }
    }
    default:
      return fallback(ast)
  }
}

/** The guard of a type-level AST (no transformations), compiled once per node. */
export const guardOf = (ast: AST.AST): Guard => {
  let guard = compiled.get(ast)
  if (guard === undefined) {
    guard = build(ast)
    compiled.set(ast, guard)
  }
  return guard
}
