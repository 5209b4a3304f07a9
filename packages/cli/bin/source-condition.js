/**
 * A module resolve hook for a checkout of the repository: it adds the
 * "@skein/source" export condition, so every @skein/* import resolves to the
 * package's TypeScript sources rather than its (maybe absent or stale) dist/.
 */
export const resolve = (specifier, context, next) =>
  next(
    specifier,
    context.conditions.includes("@skein/source")
      ? context
      : { ...context, conditions: [...context.conditions, "@skein/source"] }
  )
