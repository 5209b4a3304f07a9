/**
 * skein sessions as `@effect/cluster` entities.
 */
export {}
