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
}

// Enrolment is a second-factor secret offered for enrolment.
type Enrolment struct {
	Secret string // base32, to type into an authenticator app
	URI    string // otpauth://…, the same as a link or QR code
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
