export * as FakeModel from "./FakeModel.js"
