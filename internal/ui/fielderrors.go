package ui

import (
	"net/http"
	"strings"
)

// fieldError returns the message of an API refusal about one form field,
// in the product's voice, to show under that field; "" when e is not a
// 400 about field. The API names the field first in its validation
// messages ("name is required", "email is not a valid address"), which
// is what ties a refusal to its field.
func fieldError(e *APIError, field string) string {
	if e == nil || e.Status != http.StatusBadRequest {
		return ""
	}
	rest, ok := strings.CutPrefix(e.Message, field+" ")
	if !ok {
		return ""
	}
	switch {
	case rest == "is required":
		return "Fill this in; it can’t be blank."
	case rest == "is not a valid address":
		return "Enter an email address, like pat@example.com."
	case strings.HasPrefix(rest, "must be at most "):
		return "Make it shorter: " + strings.TrimPrefix(rest, "must be ") + "."
	case strings.HasPrefix(rest, "must be one line"):
		return "Keep it to one line of plain text."
	}
	return strings.ToUpper(field[:1]) + field[1:] + " " + strings.TrimSuffix(rest, ".") + "."
}

// formError is the refusal to show above a form: none when it is about
// one of fields (fieldError shows it under the field instead).
func formError(e *APIError, fields ...string) *APIError {
	for _, f := range fields {
		if fieldError(e, f) != "" {
			return nil
		}
	}
	return e
}
