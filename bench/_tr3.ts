import { CliMessage, Lenient } from "@skein/protocol"
import { EventTranslator } from "@skein/canonical"
import * as fs from "node:fs"
const f = process.argv[2]!
const bytes = new Uint8Array(fs.readFileSync("/work/wt/servefast/packages/protocol/test/fixtures/" + f))
const decoded = Lenient.decodeAll(CliMessage.decoder, bytes)
const id = EventTranslator.cliSessionIdOf(decoded) ?? ""
let n = 0
const t0 = performance.now()
for (let r = 0; r < 20000; r++) n += EventTranslator.translateAll({ cliSessionId: id }, decoded).length
console.log(n, ((performance.now() - t0) / 20000 * 1000).toFixed(1), "us")
