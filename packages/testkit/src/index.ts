export * as FakeModel from "./FakeModel.js"
export * as FakeCli from "./FakeCli.js"
export * as ClaudeCli from "./ClaudeCli.js"
export * as TsChild from "./TsChild.js"
