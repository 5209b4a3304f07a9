#!/usr/bin/env node
// The `skein` command. It runs from TypeScript sources through tsx until the packages build to dist/.
import { register } from "tsx/esm/api"

register()
await import("../src/main.ts")
