package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
)

// Image is what agentbox needs to know of an image.
type Image struct {
	ID     string
	Labels map[string]string
	Size   int64
}

// InspectImage returns the image ref names; ErrNotFound if there is none.
func (c *Client) InspectImage(ctx context.Context, ref string) (Image, error) {
	resp, err := c.api.ImageInspect(ctx, ref)
	if err != nil {
		return Image{}, fmt.Errorf("inspect image %s: %w", ref, c.classify(err))
	}
	img := Image{ID: resp.ID, Size: resp.Size}
	if resp.Config != nil {
		img.Labels = resp.Config.Labels
	}
	return img, nil
}

// RemoveImage removes ref; a missing image is not an error.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	_, err := c.api.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !errors.Is(c.classify(err), ErrNotFound) {
		return fmt.Errorf("remove image %s: %w", ref, c.classify(err))
	}
	return nil
}

// PullImage pulls ref, reporting progress lines to progress (may be nil).
func (c *Client) PullImage(ctx context.Context, ref string, progress func(string)) error {
	rc, err := c.api.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, c.classify(err))
	}
	defer rc.Close()
	if err := readMessages(rc, progress); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	return nil
}

// ImportImage creates image ref from a root filesystem tar stream, applying
// Dockerfile-style changes (CMD, ENV, LABEL, ...).
func (c *Client) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error {
	rc, err := c.api.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, c.classify(err))
	}
	defer rc.Close()
	if err := readMessages(rc, nil); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	return nil
}

// BuildSpec says what to build.
type BuildSpec struct {
	Tags      []string
	BuildArgs map[string]string
	Labels    map[string]string
	NoCache   bool
}

// BuildImage builds an image from a tar build context (with the classic
// builder, which every engine has), streaming each line of the engine's output
// to progress. It returns the new image's ID.
func (c *Client) BuildImage(ctx context.Context, buildContext io.Reader, spec BuildSpec, progress func(string)) (string, error) {
	args := make(map[string]*string, len(spec.BuildArgs))
	for k, v := range spec.BuildArgs {
		args[k] = &v
	}
	resp, err := c.api.ImageBuild(ctx, buildContext, build.ImageBuildOptions{
		Tags:        spec.Tags,
		BuildArgs:   args,
		Labels:      spec.Labels,
		NoCache:     spec.NoCache,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", fmt.Errorf("build image: %w", c.classify(err))
	}
	defer resp.Body.Close()
	var id string
	err = readMessagesFunc(resp.Body, progress, func(m message) {
		if m.Aux != nil {
			var aux struct{ ID string }
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				id = aux.ID
			}
		}
	})
	if err != nil {
		return "", fmt.Errorf("build image: %w", err)
	}
	return id, nil
}

// message is one JSON object of the engine's progress stream.
type message struct {
	Stream   string          `json:"stream"`
	Status   string          `json:"status"`
	Progress string          `json:"progress"`
	ID       string          `json:"id"`
	Aux      json.RawMessage `json:"aux"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	ErrorText string `json:"error"`
}

// BuildError is a failure the engine reported inside a build or pull stream.
type BuildError struct{ Message string }

func (e *BuildError) Error() string { return e.Message }

func readMessages(r io.Reader, progress func(string)) error {
	return readMessagesFunc(r, progress, nil)
}

func readMessagesFunc(r io.Reader, progress func(string), each func(message)) error {
	dec := json.NewDecoder(r)
	var partial strings.Builder
	emit := func(s string) {
		if progress == nil {
			return
		}
		partial.WriteString(s)
		text := partial.String()
		for {
			i := strings.IndexByte(text, '\n')
			if i < 0 {
				break
			}
			if line := strings.TrimRight(text[:i], "\r"); strings.TrimSpace(line) != "" {
				progress(line)
			}
			text = text[i+1:]
		}
		partial.Reset()
		partial.WriteString(text)
	}
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				emit("\n")
				return nil
			}
			return fmt.Errorf("read engine progress: %w", err)
		}
		if m.Error != nil || m.ErrorText != "" {
			text := m.ErrorText
			if m.Error != nil && m.Error.Message != "" {
				text = m.Error.Message
			}
			emit("\n")
			return &BuildError{Message: strings.TrimSpace(text)}
		}
		if each != nil {
			each(m)
		}
		switch {
		case m.Stream != "":
			emit(m.Stream)
		case m.Status != "" && m.Progress == "":
			if m.ID != "" {
				emit(m.ID + ": " + m.Status + "\n")
			} else {
				emit(m.Status + "\n")
			}
		}
	}
}
