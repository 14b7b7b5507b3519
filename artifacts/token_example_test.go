package artifacts_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

func ExampleSigner() {
	// In production the secret comes from ARTIFACT_TOKEN_SECRET or
	// LoadOrCreateSecret.
	secret := []byte("an example secret of at least 32 bytes")
	s, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{ID: "k1", Secret: secret}}, 10*time.Minute)
	if err != nil {
		panic(err)
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	token, expires, err := s.Sign("a1b2c3", now)
	if err != nil {
		panic(err)
	}
	fmt.Println("expires", expires.Format(time.RFC3339))

	claims, err := s.Verify(token, "a1b2c3", now.Add(time.Minute))
	fmt.Println("valid for", claims.ArtifactID, "signed with", claims.KeyID, err)

	_, err = s.Verify(token, "d4e5f6", now.Add(time.Minute))
	fmt.Println(errors.Is(err, artifacts.ErrTokenWrongArtifact))

	_, err = s.Verify(token, "a1b2c3", now.Add(time.Hour))
	fmt.Println(errors.Is(err, artifacts.ErrTokenExpired))

	fmt.Println(artifacts.URL("https://files.example.com", "a1b2c3", "TOKEN"))
	// Output:
	// expires 2025-06-01T12:10:00Z
	// valid for a1b2c3 signed with k1 <nil>
	// true
	// true
	// https://files.example.com/artifacts/a1b2c3?token=TOKEN
}
