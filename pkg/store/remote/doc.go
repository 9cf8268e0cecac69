// Package remote carries the team store's interface (pkg/store) over one
// connection as JSON Lines (docs/store-agent.md; the records are
// protocol.StoreAgentHello, StoreAgentRequest and StoreAgentResponse):
// Serve answers a connection's calls with any store.Store, and Client is a
// store.Store whose calls go over the connection. Errors keep their
// meaning across it (queue.ErrNotFound and the other sentinels,
// *queue.InputError, fs.ErrNotExist, teamdir.ErrNoApproval, BadInput), so
// the tools' messages and exit codes are those of the store itself.
//
// Workers.Update and Budget.Update take a callback, which cannot cross a
// wire: the client reads the document, runs the callback, and asks the
// server to write the result only if the stored document is still the one
// read (the server runs the store's own Update, under the store's lock,
// and refuses a changed document); on a refusal it reads again. The
// underlying store's locking keeps it correct, whatever the store.
package remote
