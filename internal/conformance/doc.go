// Package conformance holds behaviour tests that cross the email
// channel's packages and drive them as clients do: through the HTTP API,
// the command line and the AgentMail emulator, on both databases. They
// guard corners a conformance review found untested (address checks, key
// scopes, catch-up paging and overlap, send caps and policies, filtered
// mail, receipts, pauses). The package has no code of its own.
package conformance
