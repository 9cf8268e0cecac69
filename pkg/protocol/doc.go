// Package protocol holds the Go types of every record the powerglide tools
// exchange (DESIGN.md §3–§4): model requests and events, tool definitions,
// calls and results, tasks, worker records, loop events and the team
// journal. The JSON Schemas in schemas/ are generated from these types
// (`make schemas`) and embedded, so tests can validate real output.
//
// Every record a tool emits carries a "type" field. Decoders look at it
// first and report a type they do not know as an *UnknownTypeError, never
// dropping the record silently.
package protocol

// Version is the protocol version. Fields may be added within a version;
// renaming or removing one needs a new version.
const Version = 1
