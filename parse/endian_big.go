//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package parse

// bigEndian tells the word-at-a-time scans which end of a loaded word holds the first byte.
const bigEndian = true
