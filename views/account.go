package views

// AccountPage is a person's own page: their password, their second factor
// and their other sessions.
type AccountPage struct {
	Notice *Notice
	// MustEnrol says the configuration requires this admin to enrol a
	// second factor before any other page opens.
	MustEnrol bool
	Enrolled  bool
	Recovery  int // unused recovery codes left
	// Enrol is a second-factor secret being enrolled: shown while the
	// person confirms it with a code, and never again after.
	Enrol *Enrolment
	// Codes are new recovery codes, shown once.
	Codes []string
	// OtherSessions counts this person's other logged-in browsers.
	OtherSessions int
	// Sealed says second-factor secrets are encrypted at rest (the
	// server has a secret key); without it the page says what the
	// database file and its backups reveal.
	Sealed bool
}

// StepUp is the form that asks for the password (and code) again before
// an action that cannot be undone.
type StepUp struct {
	Next    string // where the browser goes on to
	Code    bool   // the person has a second factor: ask for its code too
	Error   string
	Minutes int // how long a step-up covers such actions
}

// Enrolment is a second-factor secret offered for enrolment.
type Enrolment struct {
	Secret string // base32, to type into an authenticator app
	URI    string // otpauth://…, the same as a link or QR code
	QR     QR     // URI drawn as a QR code
}

// LoginCodePage asks for the second factor after a right password.
type LoginCodePage struct {
	Next  string
	Error string
}

// SetupPage is the one-time form that creates the first admin.
type SetupPage struct {
	Token string
	Name  string
	Error string
}
