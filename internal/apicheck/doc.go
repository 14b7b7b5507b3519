// Package apicheck holds no code, only a test of the public packages' API:
// every exported function, method, type, field and variable names only
// types a program outside this module can name, so go doc shows nothing a
// reader cannot look up and nothing an embedder cannot construct.
package apicheck
