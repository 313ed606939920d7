package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v5"
)

// maxAPIBody bounds every JSON API request body.
const maxAPIBody = 64 << 10

// decodeJSON reads a required JSON object body into v, refusing unknown fields.
func decodeJSON(c *echo.Context, v any) error {
	raw, err := readAPIBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return errorf(http.StatusBadRequest, "this route needs a JSON body")
	}
	return unmarshalStrict(raw, v)
}

// decodeOptionalJSON is decodeJSON for routes whose body may be empty.
func decodeOptionalJSON(c *echo.Context, v any) error {
	raw, err := readAPIBody(c)
	if err != nil || len(bytes.TrimSpace(raw)) == 0 {
		return err
	}
	return unmarshalStrict(raw, v)
}

func readAPIBody(c *echo.Context) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxAPIBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "the body is larger than %d bytes", maxAPIBody)
	}
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, msg: "the body could not be read", err: err}
	}
	return raw, nil
}

func unmarshalStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "the body is not the JSON this route takes: %s", jsonProblem(err))
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "the body holds more than one JSON value")
	}
	return nil
}

// jsonProblem words a decoding error for a person.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q should be a %s", typ.Field, typ.Type)
	}
	return err.Error()
}

// actor names who is making a request, for the records it writes.
func actor(c *echo.Context) string {
	if v, ok := c.Get(actorKey).(string); ok && v != "" {
		return v
	}
	return "unknown"
}

// actorKey is where authentication leaves the actor's name.
const actorKey = "handoff.actor"
