import { expect, it } from "@effect/vitest"
import { MemoryPolicy } from "@skein/memory"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const dir = "/c/projects/-p/memory"
const dream = (toolName: string, input: Record<string, unknown>) =>
  MemoryPolicy.decide({ toolName, input }, { writableDir: dir, read: true })

it("the read-only shell: the six commands alone, nothing chained, redirected or piped", () => {
  for (const command of ["ls -la /c/projects/-p", "cat memory/MEMORY.md", "grep -rn deploy /c/projects/-p", "head -5 a.md", "tail x", "wc -l a.md"]) {
    expect(MemoryPolicy.shellDenial(command)).toBeUndefined()
  }
  expect(MemoryPolicy.shellDenial("cat a.md > /etc/passwd")).toContain("no redirection")
  expect(MemoryPolicy.shellDenial("cat a.md | tee b")).toContain("pipes")
  expect(MemoryPolicy.shellDenial("ls; rm -rf /")).toContain("chaining")
  expect(MemoryPolicy.shellDenial("ls $(rm x)")).toContain("substitution")
  expect(MemoryPolicy.shellDenial("ls `rm x`")).toContain("substitution")
  expect(MemoryPolicy.shellDenial("rm a.md")).toContain("rm is not one")
  expect(MemoryPolicy.shellDenial("curl https://example.com")).toBe("no network access: curl is not allowed")
  expect(MemoryPolicy.shellDenial("/usr/bin/wget x")).toContain("no network access")
  expect(MemoryPolicy.shellDenial("")).toContain("an empty command")
})

it("writes only inside the memory folder; the reason names the folder and the path", () => {
  expect(dream("Write", { file_path: `${dir}/kumquats.md`, content: "x" })).toEqual({ behavior: "allow" })
  expect(dream("Edit", { file_path: `${dir}/MEMORY.md` })).toEqual({ behavior: "allow" })
  const outside = dream("Write", { file_path: "/work/project/src/main.ts", content: "x" })
  expect(outside).toMatchObject({ behavior: "deny" })
  if (outside.behavior === "deny") expect(outside.message).toContain("/work/project/src/main.ts is outside it")
  expect(dream("Write", { file_path: `${dir}/../../../etc/x` })).toMatchObject({ behavior: "deny" })
  expect(dream("Write", { file_path: dir })).toMatchObject({ behavior: "deny" })
  expect(dream("Write", { file_path: `${dir}-evil/x.md` })).toMatchObject({ behavior: "deny" })
  expect(dream("Write", {})).toMatchObject({ behavior: "deny", message: "Write needs a file path" })
})

it("read tools are allowed; network and other tools are denied with a reason", () => {
  expect(dream("Read", { file_path: "/anything" })).toEqual({ behavior: "allow" })
  expect(dream("Grep", { pattern: "x" })).toEqual({ behavior: "allow" })
  expect(dream("WebFetch", { url: "https://x" })).toEqual({ behavior: "deny", message: "no network access: WebFetch is not allowed" })
  expect(dream("Bash", { command: "curl https://x" })).toEqual({ behavior: "deny", message: "no network access: curl is not allowed" })
  expect(dream("Agent", {})).toMatchObject({ behavior: "deny", message: "Agent is not available to this worker" })
})

it("session memory may read and change its one summary.md and nothing else", () => {
  const summary = "/c/projects/-p/s1/session-memory/summary.md"
  const decide = (toolName: string, input: Record<string, unknown>) =>
    MemoryPolicy.decide({ toolName, input }, { writableDir: "/c/projects/-p/s1/session-memory", writableFile: summary, read: false })
  expect(decide("Edit", { file_path: summary })).toEqual({ behavior: "allow" })
  expect(decide("Write", { file_path: "/c/projects/-p/s1/session-memory/other.md" })).toMatchObject({ behavior: "deny" })
  expect(decide("Bash", { command: "ls" })).toMatchObject({ behavior: "deny", message: "Bash is not available to this worker" })
  expect(decide("Read", { file_path: summary })).toEqual({ behavior: "allow" })
  expect(decide("Read", { file_path: "/c/projects/-p/s1.jsonl" })).toMatchObject({ behavior: "deny" })
})

it("a symlink inside the memory folder does not carry a write outside it", () => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-memory-policy-"))
  try {
    const memory = Path.join(root, "memory")
    const project = Path.join(root, "project")
    Fs.mkdirSync(memory)
    Fs.mkdirSync(project)
    Fs.symlinkSync(project, Path.join(memory, "escape"))
    Fs.symlinkSync(Path.join(project, "main.ts"), Path.join(memory, "alias.md"))
    const decide = (file: string) =>
      MemoryPolicy.decide({ toolName: "Write", input: { file_path: file, content: "x" } }, { writableDir: memory, read: true })
    expect(decide(Path.join(memory, "escape", "main.ts"))).toMatchObject({ behavior: "deny" })
    expect(decide(Path.join(memory, "alias.md"))).toMatchObject({ behavior: "deny" })
    expect(decide(Path.join(memory, "new-fact.md"))).toEqual({ behavior: "allow" })
  } finally {
    Fs.rmSync(root, { recursive: true, force: true })
  }
})
