package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/handoff/handoff/delivery"
	"github.com/handoff/handoff/facts"
	"github.com/handoff/handoff/hook"
	"github.com/handoff/handoff/keys"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/review"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

// errInternal is the sentence of every error nobody maps: its cause is
// logged with the request's correlation id, never shown.
const errInternal = "something went wrong on our side; it has been logged"

// correlationHeader carries the correlation id of a failed request (5xx),
// the id its one log line has, so a person can find that line.
const correlationHeader = "X-Correlation-Id"

// answerFor is the one place where an error becomes an answer: the status
// and the sentence handleError sends (as JSON, a page or an htmx fragment)
// and the dashboard shows. Handlers return store and domain errors as they
// come, wrapped with context or not; the mapping reads them with errors.Is
// and errors.As:
//
//	*apiError (errorf)          its status and sentence: the handler's own answer
//	*echo.HTTPError, echo codes its code and message (the router's 404 and 405)
//	*hook.Error                 its status and sentence (an inbound refusal)
//	*store.Unreadable           422, its sentence ("event 01… cannot be read: <reason>"):
//	                            the record asked for is damaged; every list shows it as a row
//	*delivery.NotRegenerableError 400, its sentence
//	*review.TooLongError        400, its sentence (the reply's length and its provider's limit)
//	*facts.TextError            400, its sentence (facts too long for a prompt, or not text)
//	*review.WindowClosedError   409, its sentence (the reply window closed: send a template or use another channel)
//	*review.TemplateError       400, its sentence (a template the provider does not have, or its parameters)
//	*delivery.UnsafeReplayError   409, its sentence (send the confirmation)
//	*store.ConflictError        409, its sentence; "that decision stands"
//	*store.SupersededError      409, its sentence, naming the current draft
//	*store.StateError           409, its sentence
//	*delivery.UndoError         409, its sentence (the reply can no longer be undone)
//	*keys.MismatchError         422, its sentence (a key claimed with another body)
//	*keys.BusyError             409, its sentence (held by another claim)
//	*keys.LostClaimError        409, its sentence (that claim lost the key)
//	*keys.StateError            409, its sentence
//	*keys.UnsureError           409, its sentence and where to reconcile
//	password.ErrTooShort/Long   400, its sentence
//	*users.Invalid              400, its sentence (what was typed)
//	*users.Conflict             409, its sentence (the account's state)
//	users.ErrWrongPassword      403 (a change of one's own account, a step-up)
//	*users.TooMany              429, its sentence (limited sets Retry-After)
//	users.ErrLoginFailed        401; users.ErrAccountDisabled 403
//	*users.CodeRefused          401, its sentence; 429 for users.ErrCodeLocked
//	*users.StepUpRefused        403, its sentence; 429 for users.ErrCodeLocked
//	*users.TokenRefused         401, its sentence
//	store.ErrNotFound           404, with the sentence of missing(err, …)
//	store.ErrExists             409, with the sentence of taken(err, …)
//	refused(err, status)        status, err's sentence, when nothing above matches
//	anything else               500, errInternal
//
// A not-found or exists that no handler named stays a 500: it is a record
// that another record points at, found missing, which is damage, not the
// client's mistake. ErrUnavailable, ErrClosed and a context's end are 500s
// too, except where a route answers them itself (a webhook that could not
// be stored and /readyz say 503, with their own sentence, as an *apiError).
func answerFor(err error) (status int, msg string) {
	var (
		ae         *apiError
		he         *echo.HTTPError
		hk         *hook.Error
		notRegen   *delivery.NotRegenerableError
		tooLong    *review.TooLongError
		factsText  *facts.TextError
		closed     *review.WindowClosedError
		tplErr     *review.TemplateError
		unsafe     *delivery.UnsafeReplayError
		conflict   *store.ConflictError
		superseded *store.SupersededError
		state      *store.StateError
		undo       *delivery.UndoError
		mismatch   *keys.MismatchError
		busy       *keys.BusyError
		unsure     *keys.UnsureError
		lost       *keys.LostClaimError
		keyState   *keys.StateError
		named      *namedError
		refusal    *refusalError
		unreadable *store.Unreadable
		invalid    *users.Invalid
		refuse     *users.Conflict
		tooMany    *users.TooMany
		code       *users.CodeRefused
		stepUp     *users.StepUpRefused
		token      *users.TokenRefused
	)
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg
	case errors.As(err, &he):
		if he.Message == "" {
			return he.Code, http.StatusText(he.Code)
		}
		return he.Code, he.Message
	case errors.As(err, &hk):
		return hk.Status, hk.Msg
	case errors.As(err, &unreadable):
		return http.StatusUnprocessableEntity, unreadable.Error()
	case errors.As(err, &notRegen):
		return http.StatusBadRequest, notRegen.Error()
	case errors.As(err, &factsText):
		return http.StatusBadRequest, factsText.Error()
	case errors.As(err, &tooLong):
		return http.StatusBadRequest, tooLong.Error()
	case errors.As(err, &closed):
		return http.StatusConflict, closed.Error()
	case errors.As(err, &tplErr):
		return http.StatusBadRequest, tplErr.Error()
	case errors.As(err, &unsafe):
		return http.StatusConflict, unsafe.Error()
	case errors.As(err, &superseded):
		return http.StatusConflict, superseded.Error()
	case errors.As(err, &conflict):
		return http.StatusConflict, conflict.Error() + "; that decision stands"
	case errors.As(err, &state):
		return http.StatusConflict, state.Error()
	case errors.As(err, &undo):
		return http.StatusConflict, undo.Error()
	case errors.As(err, &mismatch):
		return http.StatusUnprocessableEntity, mismatch.Error()
	case errors.As(err, &busy):
		return http.StatusConflict, busy.Error()
	case errors.As(err, &unsure):
		return http.StatusConflict, unsure.Error() + "; check the side effect, then POST /api/v1/keys/" + unsure.Key + "/reconcile"
	case errors.As(err, &lost):
		return http.StatusConflict, lost.Error()
	case errors.As(err, &keyState):
		return http.StatusConflict, keyState.Error()
	case errors.As(err, &invalid):
		return http.StatusBadRequest, invalid.Error()
	case errors.As(err, &refuse):
		return http.StatusConflict, refuse.Error()
	case errors.Is(err, users.ErrWrongPassword):
		return http.StatusForbidden, users.ErrWrongPassword.Error()
	case errors.As(err, &tooMany):
		return http.StatusTooManyRequests, tooMany.Error()
	case errors.Is(err, users.ErrLoginFailed):
		return http.StatusUnauthorized, users.ErrLoginFailed.Error()
	case errors.Is(err, users.ErrAccountDisabled):
		return http.StatusForbidden, users.ErrAccountDisabled.Error()
	case errors.As(err, &code), errors.As(err, &stepUp):
		status, msg := http.StatusUnauthorized, ""
		if code != nil {
			msg = code.Error()
		} else {
			status, msg = http.StatusForbidden, stepUp.Error()
		}
		if errors.Is(err, users.ErrCodeLocked) {
			status = http.StatusTooManyRequests
		}
		return status, msg
	case errors.As(err, &token):
		return http.StatusUnauthorized, token.Error()
	case errors.Is(err, password.ErrTooShort), errors.Is(err, password.ErrTooLong):
		return http.StatusBadRequest, err.Error()
	case errors.As(err, &named) && errors.Is(err, named.sentinel):
		if named.sentinel == store.ErrExists {
			return http.StatusConflict, named.msg
		}
		return http.StatusNotFound, named.msg
	case errors.As(err, &refusal):
		return refusal.status, refusal.err.Error()
	case echo.StatusCode(err) != 0:
		return echo.StatusCode(err), http.StatusText(echo.StatusCode(err))
	}
	return http.StatusInternalServerError, errInternal
}

// limited gives a *users.TooMany among err its Retry-After header on c
// (whole seconds, rounded up); answerFor gives the rest of its answer.
// err comes back as it is.
func limited(c *echo.Context, err error) error {
	var tm *users.TooMany
	if errors.As(err, &tm) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(tm.RetrySeconds()))
	}
	return err
}

// namedError gives a store sentinel the sentence of what the request
// asked for: the store says "not found", the route knows it was "the draft
// d01…". It words only that sentinel; any other cause keeps its own answer.
type namedError struct {
	sentinel error // store.ErrNotFound or store.ErrExists
	msg      string
	err      error
}

func (e *namedError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *namedError) Unwrap() error { return e.err }

// missing words err, should it be store.ErrNotFound, as the sentence format
// makes (a 404). Other causes keep their own answer (a *store.StateError
// stays a 409 with its sentence), and nil stays nil, so a handler can
// return missing(err, …) without looking at err first.
func missing(err error, format string, a ...any) error {
	return name(store.ErrNotFound, err, format, a...)
}

// taken is missing for store.ErrExists (a 409): a name already in use.
func taken(err error, format string, a ...any) error {
	return name(store.ErrExists, err, format, a...)
}

func name(sentinel, err error, format string, a ...any) error {
	if err == nil {
		return nil
	}
	return &namedError{sentinel: sentinel, msg: fmt.Sprintf(format, a...), err: err}
}

// refusalError is the answer of a step that only ever refuses the client's
// input, for an error that is not one of answerFor's own.
type refusalError struct {
	status int
	err    error
}

func (e *refusalError) Error() string { return e.err.Error() }
func (e *refusalError) Unwrap() error { return e.err }

// refused answers err with status and err's own sentence unless answerFor
// knows better (a *hook.Error keeps its status). nil stays nil.
func refused(err error, status int) error {
	if err == nil {
		return nil
	}
	return &refusalError{status: status, err: err}
}
