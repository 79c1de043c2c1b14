// Package agentmail is the client for the AgentMail provider API used by the
// Paperclip email channel: the REST client ([Client]), the WebSocket event
// stream ([Dial], [Stream]), event normalization for both transports
// ([NormalizeEvent]), Svix webhook signature verification
// ([WebhookVerifier]) and base-URL validation for configuration
// ([ValidateAPIBaseURL], [ValidateWebSocketURL]).
//
// # Errors
//
// Every failure returned by this package has a log-safe Error string: it
// never contains provider message text, fix hints, documentation URLs, inbox
// ids, message ids, request URLs or credentials. The server may log
// err.Error() directly.
//
//   - A non-2xx provider response is an [*Error] carrying the HTTP status, a
//     fixed operation name (see [OperationFor]), an allowlisted provider code
//     (see [ProviderCodes]) and a clamped Retry-After delay.
//   - A failure to complete the exchange (refused connection, reset,
//     timeout, cancellation) is a [*NetworkError]; [MayHaveBeenSent] tells a
//     request that might have reached AgentMail apart from one that
//     certainly did not.
//   - A 2xx response whose body is too large or does not decode is a
//     [*ResponseError].
//
// Callers branch with errors.Is against [ErrNotFound], [ErrConflict],
// [ErrRateLimited], [ErrUnauthorized], [ErrForbidden], [ErrServerError] and
// friends, or with the predicates [IsTransient], [IsAuthFailure] and
// [RetryAfter]. [ProblemFor] maps a provider failure to the HTTP response the
// email routes return.
//
// Diagnostics never retry and never suppress failures: each call makes at
// most one HTTP request, and retry policy belongs to the callers.
package agentmail
