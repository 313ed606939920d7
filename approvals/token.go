package approvals

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// A token is a short message a surface hands out and takes back (a
// Telegram button's callback_data, a reply address, a push action's URL)
// with a MAC that proves handoff made it: msg + "." + the first macBytes
// of HMAC-SHA256(key, scope + 0x00 + msg), base64url. Scope keeps a token
// of one surface from being taken by another. A token proves only that
// handoff made it: the person acting is still resolved and checked.

// macBytes is a token's MAC length: 72 bits, as short as a 64-byte
// callback_data needs and far past guessing within a webhook's rate.
const macBytes = 9

// Seal is msg's token for scope under key.
func Seal(key []byte, scope, msg string) string {
	return msg + "." + base64.RawURLEncoding.EncodeToString(tokenMAC(key, scope, msg))
}

// Unseal is the msg of a token Seal made for scope under key; false for
// anything else.
func Unseal(key []byte, scope, token string) (string, bool) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || len(key) == 0 {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil {
		return "", false
	}
	msg := token[:i]
	if !hmac.Equal(got, tokenMAC(key, scope, msg)) {
		return "", false
	}
	return msg, true
}

func tokenMAC(key []byte, scope, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(msg))
	return m.Sum(nil)[:macBytes]
}
