// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// troubleshootingPage is where every refusal a user can meet at admission is explained, by its text.
const troubleshootingPage = "../../docs/troubleshooting.md"

// refusalSources are the packages whose messages admission returns: this one and the validation
// the webhooks share with the node service; constRoots also lend the constants messages name.
var (
	refusalSources = []string{".", "../../apis/v1alpha1/validation"}
	constRoots     = []string{".", "../../apis/v1alpha1/validation", "../../apis/v1alpha1"}
)

// A refusal message as the code builds it: literal text with holes (a %v, an error, a variable's
// value) where it is not known before it is built.
type refusal struct {
	pos   string
	parts []string // the literal fragments, in order; a hole between any two
}

// TestTroubleshootingCoversEveryRefusal fails when the code gains an admission refusal whose text
// docs/troubleshooting.md does not quote. It reads the webhooks' and the shared validation's source
// (go/ast): every detail of a field.Forbidden, field.Invalid, field.Required or tooLong error (what the API
// server shows after the field path), every admission.Denied reason and http.Error text, with
// format strings, string concatenations, constants and the local variables a message is put in
// resolved. Each literal fragment of 8 characters or more must be on the page (whitespace
// folded), so a message is found however the page shows its holes (`<pod>`, `...`).
func TestTroubleshootingCoversEveryRefusal(t *testing.T) {
	page, err := os.ReadFile(troubleshootingPage)
	if err != nil {
		t.Fatal(err)
	}
	text := fold(string(page))

	consts := map[string]ast.Expr{}
	funcs := map[string]*ast.FuncDecl{}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, dir := range constRoots {
		for _, f := range parseDir(t, fset, dir) {
			collectConsts(f, consts)
			if slices.Contains(refusalSources, dir) {
				files = append(files, f)
				for _, d := range f.Decls {
					if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
						funcs[fn.Name.Name] = fn
					}
				}
			}
		}
	}
	var refusals []refusal
	for _, f := range files {
		refusals = append(refusals, collectRefusals(fset, f, &scope{consts: consts, funcs: funcs})...)
	}
	if len(refusals) < 50 {
		t.Fatalf("found %d refusal messages in %v: the reader no longer sees them", len(refusals), refusalSources)
	}
	checked := 0
	for _, r := range refusals {
		long := 0
		for _, p := range r.parts {
			p = fold(p)
			if len(p) < 8 {
				continue
			}
			long++
			if !strings.Contains(text, p) {
				t.Errorf("%s: refusal text %q is not in %s: add the message with its cause and fix",
					r.pos, p, filepath.Base(troubleshootingPage))
			}
		}
		if long > 0 {
			checked++
		}
	}
	t.Logf("%d refusal messages, %d with text of their own checked against the page", len(refusals), checked)
}

func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") || strings.HasPrefix(filepath.Base(n), "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// collectConsts records the package-level constants, by name (qualified names such as
// v1alpha1.AnnotationX resolve by their last element: the packages read share no names).
func collectConsts(f *ast.File, consts map[string]ast.Expr) {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					consts[n.Name] = vs.Values[i]
				}
			}
		}
	}
}

// scope is what a message expression is resolved in: the packages' constants and functions, and
// the local variables of the function it is in.
type scope struct {
	consts map[string]ast.Expr
	funcs  map[string]*ast.FuncDecl
	locals map[string][]ast.Expr
}

// assignments maps each local variable of body to the values it is given.
func assignments(body *ast.BlockStmt) map[string][]ast.Expr {
	locals := map[string][]ast.Expr{}
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					locals[id.Name] = append(locals[id.Name], as.Rhs[i])
				}
			}
		}
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					locals[id.Name] = append(locals[id.Name], vs.Values[i])
				}
			}
		}
		return true
	})
	return locals
}

// collectRefusals finds the message argument of every refusal call in f and resolves it.
func collectRefusals(fset *token.FileSet, f *ast.File, sc *scope) []refusal {
	var out []refusal
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		in := &scope{consts: sc.consts, funcs: sc.funcs, locals: assignments(fn.Body)}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			var arg ast.Expr
			switch n := n.(type) {
			case *ast.CallExpr:
				arg = messageArg(n)
			case *ast.AssignStmt:
				// A detail added to a Kubernetes error: err.Detail += "; ...".
				if sel, ok := n.Lhs[0].(*ast.SelectorExpr); ok && n.Tok == token.ADD_ASSIGN && sel.Sel.Name == "Detail" {
					arg = n.Rhs[0]
				}
			}
			if arg == nil {
				return true
			}
			pos := fset.Position(n.Pos())
			where := filepath.Base(filepath.Dir(pos.Filename)) + "/" + filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)
			for _, parts := range resolve(arg, in, 0) {
				out = append(out, refusal{pos: where, parts: parts})
			}
			return true
		})
	}
	return out
}

// messageArg is the message of a refusal call, or nil for any other call.
func messageArg(call *ast.CallExpr) ast.Expr {
	if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "tooLong" && len(call.Args) > 1 {
		return call.Args[1] // validation's TooLong error with a detail of its own
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return nil
	}
	at := func(i int) ast.Expr {
		if i < len(call.Args) {
			return call.Args[i]
		}
		return nil
	}
	switch pkg.Name + "." + sel.Sel.Name {
	case "field.Forbidden", "field.Required":
		return at(1)
	case "field.Invalid":
		return at(2)
	case "admission.Denied":
		return at(0)
	case "http.Error":
		return at(1)
	}
	return nil
}

// resolve gives the literal fragments of every message expr can be: a string, a concatenation, a
// fmt.Sprintf or fmt.Errorf format, a constant, or a local variable (one message per value it is
// given). What is not known before run time is a hole.
func resolve(expr ast.Expr, sc *scope, depth int) [][]string {
	hole := [][]string{{"", ""}} // a break between the fragments around it
	if depth > 6 {
		return hole
	}
	switch e := expr.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return hole
		}
		v, err := strconv.Unquote(e.Value)
		if err != nil {
			return hole
		}
		return [][]string{{v}}
	case *ast.ParenExpr:
		return resolve(e.X, sc, depth)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return hole
		}
		var out [][]string
		for _, l := range resolve(e.X, sc, depth+1) {
			for _, r := range resolve(e.Y, sc, depth+1) {
				out = append(out, join(l, r))
			}
		}
		return out
	case *ast.Ident:
		if v, ok := sc.consts[e.Name]; ok {
			return resolve(v, sc, depth+1)
		}
		var out [][]string
		for _, v := range sc.locals[e.Name] {
			out = append(out, resolve(v, sc, depth+1)...)
		}
		if len(out) == 0 {
			return hole
		}
		return out
	case *ast.SelectorExpr:
		if v, ok := sc.consts[e.Sel.Name]; ok {
			return resolve(v, sc, depth+1)
		}
		return hole
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && sc.funcs[id.Name] != nil {
			return returned(sc.funcs[id.Name], sc, depth+1)
		}
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok || len(e.Args) == 0 {
			return hole
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" || (sel.Sel.Name != "Sprintf" && sel.Sel.Name != "Errorf") {
			return hole
		}
		var out [][]string
		for _, format := range resolve(e.Args[0], sc, depth+1) {
			var parts []string
			for i, p := range format {
				if i > 0 {
					parts = append(parts, "")
				}
				parts = join(parts, verb.Split(p, -1))
			}
			out = append(out, parts)
		}
		return out
	}
	return hole
}

// returned resolves what a function of the packages returns (its first result), for a message
// made by a helper such as podNotRecreatable.
func returned(fn *ast.FuncDecl, sc *scope, depth int) [][]string {
	in := &scope{consts: sc.consts, funcs: sc.funcs, locals: assignments(fn.Body)}
	var out [][]string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) > 0 {
			out = append(out, resolve(r.Results[0], in, depth)...)
		}
		return true
	})
	return out
}

// verb matches a format verb, which the page shows as a placeholder.
var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)

// join appends r to l, the last fragment of l and the first of r forming one.
func join(l, r []string) []string {
	if len(l) == 0 {
		return slices.Clone(r)
	}
	if len(r) == 0 {
		return slices.Clone(l)
	}
	out := slices.Clone(l[:len(l)-1])
	out = append(out, l[len(l)-1]+r[0])
	return append(out, r[1:]...)
}

// fold makes line breaks and runs of spaces one space, and drops Markdown's code marks, so a
// message wrapped or quoted on the page is found.
func fold(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " ")
}
