package execd

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/server/tenant"
)

// authenticate checks the request's token for sandbox id without any
// engine or database call: genuine, for this id, not expired, and of a
// tenant the server still serves. What is left, that the token is of the
// sandbox's current incarnation, needs the sandbox (Claims.Opens). A
// refusal says why, so a client knows whether asking for the endpoint
// again helps.
func (h *Handler) authenticate(r *http.Request, id string) (tenant.Claims, *apiError) {
	token := r.Header.Get(TokenHeader)
	if token == "" {
		return tenant.Claims{}, errorf(http.StatusUnauthorized, codeUnauthorized, "missing %s header", TokenHeader)
	}
	claims, err := h.opts.Tokens.Verify(token, id)
	switch {
	case errors.Is(err, tenant.ErrTokenExpired):
		return claims, errorf(http.StatusUnauthorized, codeTokenExpired,
			"the access token expired at %s: ask for the sandbox's endpoint again (GET /v1/sandboxes/%s/endpoints/{port}) for a new one",
			claims.Expires.UTC().Format(time.RFC3339), id)
	case err != nil:
		return claims, errorf(http.StatusForbidden, codeForbidden,
			"the access token is not valid for this sandbox (another sandbox's, forged, or issued before this server's token secret or format changed): ask for its endpoint again (GET /v1/sandboxes/%s/endpoints/{port})", id)
	case !h.opts.Keys.Serves(claims.Tenant):
		return claims, errorf(http.StatusUnauthorized, codeKeyRevoked,
			"the API key this access token was issued to is revoked (no longer configured on this server): its tokens open nothing")
	}
	return claims, nil
}

// refuse answers an authentication refusal and closes the connection: a
// client that sends bad credentials gets no kept-alive connection to try
// again on.
func refuse(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Connection", "close")
	writeError(w, e)
}
