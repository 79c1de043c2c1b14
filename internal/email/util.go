package email

import (
	"regexp"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/safetext"
)

// checkAPIKey validates a provider API key given by a user: present, at
// most 4096 characters and a single token. A CR or LF would split the
// Authorization header of every provider call made with it.
func checkAPIKey(key string) error {
	if key == "" || len(key) > 4096 {
		return domain.Refuse(domain.KindInvalid, "apiKey is required (at most 4096 characters)")
	}
	if err := safetext.Token(key); err != nil {
		return domain.Refuse(domain.KindInvalid, "apiKey must be the key alone: it %s", err)
	}
	return nil
}

// domainRE is a DNS name of at least two labels (letters, digits, hyphens).
var domainRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)

// checkDomain validates an optional inbox domain name.
func checkDomain(d string) error {
	if d != "" && (len(d) > 253 || !domainRE.MatchString(d)) {
		return domain.Refuse(domain.KindInvalid, "domain is not a valid domain name")
	}
	return nil
}
