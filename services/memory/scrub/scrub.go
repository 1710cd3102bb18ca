// Package scrub removes personal data and secrets (email addresses, phone
// numbers, payment card numbers, API keys and tokens) from text before the
// memory service stores it.
package scrub
