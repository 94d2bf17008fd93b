// Package docs checks the documentation against the code: every condition
// and event reason ferry emits is explained in the troubleshooting page,
// every relative link in the Markdown files resolves, and every docs page is
// reachable from README.md or docs/README.md.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// Kind says how a reason reaches a user.
type Kind string

const (
	// KindCondition: the Reason of a condition (metav1.Condition, a pod,
	// node or certificate condition) or of a pod's status.
	KindCondition Kind = "condition"
	// KindEvent: the reason of a Kubernetes Event.
	KindEvent Kind = "event"
	// KindDeclared: an exported constant named as a reason (ReasonX,
	// MoveReasonX) that no condition or event was seen to carry, such as
	// the reason label of a metric.
	KindDeclared Kind = "declared"
)

// Reason is one reason value and where the code emits it.
type Reason struct {
	Value string
	Kinds map[Kind]bool
	// Sites are the file:line positions of the condition, status or event
	// it reaches (or of its declaration for KindDeclared).
	Sites []string
}

// Collection is what CollectReasons found.
type Collection struct {
	Reasons map[string]*Reason
	// Dynamic are sites whose reason is computed at run time (a
	// Kubernetes API status reason, a copied event): they carry no
	// reason of ferry's own.
	Dynamic []string
	// Unclassified are event-recorder calls whose reason argument could
	// not be told apart: the collector must learn their shape.
	Unclassified []string
}

// Sorted is the reasons in order of value.
func (c *Collection) Sorted() []*Reason {
	out := make([]*Reason, 0, len(c.Reasons))
	for _, r := range c.Reasons {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out
}

// Count is the number of reasons of kind k.
func (c *Collection) Count(k Kind) int {
	n := 0
	for _, r := range c.Reasons {
		if r.Kinds[k] {
			n++
		}
	}
	return n
}

// reasonWord is what Kubernetes accepts as a condition reason
// (metav1.Condition's validation); sentences are messages, not reasons.
var reasonWord = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// reasonConst names an exported constant declared as a reason.
var reasonConst = regexp.MustCompile(`^([A-Z][A-Za-z]*)?Reason[A-Z]`)

// skipDirs are not part of what ferry ships: tests, test beds, generators.
var skipDirs = map[string]bool{"test": true, "hack": true, "vendor": true, "testdata": true, "examples": true, "docs": true}

type pkg struct {
	dir, path string
	files     []*ast.File
	// consts maps a package-level constant to its value expression and
	// the file it is declared in (for that file's imports).
	consts map[string]constDecl
	// funcs maps a function or method name to its declarations.
	funcs map[string][]*ast.FuncDecl
	// fileOf maps a declaration to its file.
	fileOf map[*ast.FuncDecl]*ast.File
}

type constDecl struct {
	expr ast.Expr
	file *ast.File
	pos  token.Pos
}

type collector struct {
	fset   *token.FileSet
	root   string
	pkgs   map[string]*pkg // by import path
	out    *Collection
	seen   map[string]bool // resolution in progress or done, against cycles
	queued map[string]bool // param sinks already followed
	work   []paramSink
}

// scope is where an expression is evaluated: its package, file and the
// chain of enclosing functions, outermost first.
type scope struct {
	p     *pkg
	file  *ast.File
	funcs []ast.Node // *ast.FuncDecl then nested *ast.FuncLit
}

// paramSink: parameter index of a function (or of a closure assigned to
// a local name) reaches a reason.
type paramSink struct {
	p     *pkg
	name  string   // function, method or closure variable name
	outer ast.Node // for a closure: the *ast.FuncDecl it lives in
	index int      // parameter index
	kind  Kind     // what the reason becomes
	site  string   // where it becomes it
	decl  *ast.FuncDecl
}

// CollectReasons parses every non-test .go file of the module at root
// (outside test/, hack/ and examples/) and returns the reasons its
// conditions, pod statuses and events carry, plus exported constants
// declared as reasons.
func CollectReasons(root string) (*Collection, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("reading go.mod: %w", err)
	}
	module := modfile.ModulePath(gomod)
	if module == "" {
		return nil, fmt.Errorf("go.mod in %s: no module line", root)
	}
	c := &collector{fset: token.NewFileSet(), root: root, pkgs: map[string]*pkg{},
		out:  &Collection{Reasons: map[string]*Reason{}},
		seen: map[string]bool{}, queued: map[string]bool{}}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || (filepath.Dir(rel) == "." && skipDirs[d.Name()]) || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		f, err := parser.ParseFile(c.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", rel, err)
		}
		ip := module
		if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
			ip += "/" + dir
		}
		p := c.pkgs[ip]
		if p == nil {
			p = &pkg{dir: filepath.Dir(path), path: ip, consts: map[string]constDecl{}, funcs: map[string][]*ast.FuncDecl{}, fileOf: map[*ast.FuncDecl]*ast.File{}}
			c.pkgs[ip] = p
		}
		p.files = append(p.files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range c.pkgs {
		for _, f := range p.files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					if d.Tok != token.CONST {
						continue
					}
					for _, s := range d.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								p.consts[n.Name] = constDecl{expr: vs.Values[i], file: f, pos: n.Pos()}
							}
						}
					}
				case *ast.FuncDecl:
					p.funcs[d.Name.Name] = append(p.funcs[d.Name.Name], d)
					p.fileOf[d] = f
				}
			}
		}
	}
	for _, ip := range c.sortedPkgs() {
		p := c.pkgs[ip]
		for _, f := range p.files {
			c.walkFile(p, f)
		}
	}
	for len(c.work) > 0 {
		s := c.work[0]
		c.work = c.work[1:]
		c.followParam(s)
	}
	// Exported constants named as reasons that nothing above reached.
	for _, ip := range c.sortedPkgs() {
		p := c.pkgs[ip]
		names := make([]string, 0, len(p.consts))
		for n := range p.consts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !reasonConst.MatchString(n) {
				continue
			}
			d := p.consts[n]
			vals, _ := c.resolve(d.expr, scope{p: p, file: d.file}, use{kind: KindDeclared, site: c.pos(d.pos)})
			for _, v := range vals {
				if r := c.out.Reasons[v]; r != nil && (r.Kinds[KindCondition] || r.Kinds[KindEvent]) {
					continue
				}
				c.add(v, KindDeclared, c.pos(d.pos))
			}
		}
	}
	sort.Strings(c.out.Dynamic)
	sort.Strings(c.out.Unclassified)
	return c.out, nil
}

func (c *collector) sortedPkgs() []string {
	out := make([]string, 0, len(c.pkgs))
	for ip := range c.pkgs {
		out = append(out, ip)
	}
	sort.Strings(out)
	return out
}

func (c *collector) pos(p token.Pos) string {
	position := c.fset.Position(p)
	rel, err := filepath.Rel(c.root, position.Filename)
	if err != nil {
		rel = position.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), position.Line)
}

func (c *collector) add(v string, k Kind, site string) {
	if !reasonWord.MatchString(v) {
		return
	}
	r := c.out.Reasons[v]
	if r == nil {
		r = &Reason{Value: v, Kinds: map[Kind]bool{}}
		c.out.Reasons[v] = r
	}
	r.Kinds[k] = true
	for _, s := range r.Sites {
		if s == site {
			return
		}
	}
	r.Sites = append(r.Sites, site)
}

// sink records what expression e (a reason) can be, in scope sc.
func (c *collector) sink(e ast.Expr, sc scope, k Kind) {
	site := c.pos(e.Pos())
	vals, dynamic := c.resolve(e, sc, use{kind: k, site: site})
	for _, v := range vals {
		c.add(v, k, site)
	}
	if dynamic {
		c.out.Dynamic = append(c.out.Dynamic, site)
	}
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// use is what a resolved value becomes, and where: a parameter met on
// the way is followed to its callers with it.
type use struct {
	kind Kind
	site string
}

// resolve returns the constant values e can have; dynamic is true when
// some of its values are computed at run time. A parameter of an
// enclosing function is queued: its callers' arguments are resolved later.
func (c *collector) resolve(e ast.Expr, sc scope, u use) (vals []string, dynamic bool) {
	switch e := unparen(e).(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			if s, err := strconv.Unquote(e.Value); err == nil {
				return []string{s}, false
			}
		}
		return nil, true
	case *ast.Ident:
		if len(sc.funcs) > 0 {
			if ps, ok := c.paramOf(e.Name, sc); ok {
				ps.kind, ps.site = u.kind, u.site
				c.queue(ps)
				return nil, false
			}
			rhss := c.assignments(e.Name, sc)
			if len(rhss) > 0 {
				key := fmt.Sprintf("local %p %s", sc.funcs[0], e.Name)
				if c.seen[key] {
					return nil, false
				}
				c.seen[key] = true
				defer delete(c.seen, key)
				for _, rhs := range rhss {
					v, d := c.resolve(rhs, sc, u)
					vals = append(vals, v...)
					dynamic = dynamic || d
				}
				return vals, dynamic
			}
		}
		if d, ok := sc.p.consts[e.Name]; ok {
			return c.resolveConst(sc.p, e.Name, d, u)
		}
		return nil, true
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			if ip, ok := importPath(sc.file, x.Name); ok {
				p := c.pkgs[ip]
				if p == nil {
					return nil, true // a constant of another module
				}
				if d, ok := p.consts[e.Sel.Name]; ok {
					return c.resolveConst(p, e.Sel.Name, d, u)
				}
				return nil, true
			}
		}
		return c.fieldValues(sc.p, e.Sel.Name, u)
	case *ast.CallExpr:
		if callee := c.callee(e, sc); callee != nil {
			return c.returns(callee, 0, u)
		}
		if len(e.Args) == 1 {
			return c.resolve(e.Args[0], sc, u) // a conversion: string(x), T(x)
		}
		return nil, true
	case *multiValue:
		if call, ok := e.call.(*ast.CallExpr); ok {
			if callee := c.callee(call, sc); callee != nil {
				return c.returns(callee, e.index, u)
			}
		}
		return nil, true
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return nil, true
		}
		l, dl := c.resolve(e.X, sc, u)
		r, dr := c.resolve(e.Y, sc, u)
		for _, a := range l {
			for _, b := range r {
				vals = append(vals, a+b)
			}
		}
		return vals, dl || dr
	}
	return nil, true
}

func (c *collector) resolveConst(p *pkg, name string, d constDecl, u use) ([]string, bool) {
	key := "const " + p.path + "." + name
	if c.seen[key] {
		return nil, false
	}
	c.seen[key] = true
	defer delete(c.seen, key)
	return c.resolve(d.expr, scope{p: p, file: d.file}, u)
}

// fieldValues is every value the package stores into a field named name
// (x.name = v, T{name: v}): a field read like ready.Reason carries one of
// them.
func (c *collector) fieldValues(p *pkg, name string, u use) (vals []string, dynamic bool) {
	key := "field " + p.path + "." + name
	if c.seen[key] {
		return nil, false
	}
	c.seen[key] = true
	defer delete(c.seen, key)
	for _, f := range p.files {
		walkScoped(p, f, func(n ast.Node, sc scope) {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if s, ok := l.(*ast.SelectorExpr); ok && s.Sel.Name == name {
						v, d := c.rhsAt(n, i, sc, u)
						vals, dynamic = append(vals, v...), dynamic || d
					}
				}
			case *ast.CompositeLit:
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == name {
							v, d := c.resolve(kv.Value, sc, u)
							vals, dynamic = append(vals, v...), dynamic || d
						}
					}
				}
			}
		})
	}
	return vals, dynamic
}

// rhsAt resolves what assignment a puts into its i-th left-hand side.
func (c *collector) rhsAt(a *ast.AssignStmt, i int, sc scope, u use) ([]string, bool) {
	if len(a.Rhs) == len(a.Lhs) {
		return c.resolve(a.Rhs[i], sc, u)
	}
	if len(a.Rhs) == 1 {
		if call, ok := a.Rhs[0].(*ast.CallExpr); ok {
			if callee := c.callee(call, sc); callee != nil {
				return c.returns(callee, i, u)
			}
		}
	}
	return nil, true
}

// assignments is every right-hand side assigned to the local name in the
// outermost enclosing function (closures included).
func (c *collector) assignments(name string, sc scope) []ast.Expr {
	var out []ast.Expr
	body := funcBody(sc.funcs[0])
	if body == nil {
		return nil
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name {
					if len(n.Rhs) == len(n.Lhs) {
						out = append(out, n.Rhs[i])
					} else if len(n.Rhs) == 1 {
						out = append(out, &multiValue{call: n.Rhs[0], index: i})
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name && i < len(n.Values) {
					out = append(out, n.Values[i])
				}
			}
		}
		return true
	})
	// A closure's own variables shadow nothing we track; a FuncLit
	// assigned to the name is not a reason.
	kept := out[:0]
	for _, e := range out {
		if _, ok := e.(*ast.FuncLit); !ok {
			kept = append(kept, e)
		}
	}
	return kept
}

// multiValue stands for the index-th value of a multi-value call
// (a, b := f()).
type multiValue struct {
	ast.BadExpr
	call  ast.Expr
	index int
}

// callee is the function declaration a call names, if it is one of the
// module's (a package function, or a method called by name in the same
// package).
func (c *collector) callee(call *ast.CallExpr, sc scope) *ast.FuncDecl {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		for _, d := range sc.p.funcs[f.Name] {
			if d.Recv == nil {
				return d
			}
		}
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			if ip, ok := importPath(sc.file, x.Name); ok {
				if p := c.pkgs[ip]; p != nil {
					for _, d := range p.funcs[f.Sel.Name] {
						if d.Recv == nil {
							return d
						}
					}
				}
				return nil
			}
		}
		ds := sc.p.funcs[f.Sel.Name]
		if len(ds) == 1 && ds[0].Recv != nil {
			return ds[0]
		}
	}
	return nil
}

// returns resolves the index-th result of every return statement of d.
func (c *collector) returns(d *ast.FuncDecl, index int, u use) (vals []string, dynamic bool) {
	p := c.pkgOf(d)
	if p == nil || d.Body == nil {
		return nil, true
	}
	key := fmt.Sprintf("returns %p %d", d, index)
	if c.seen[key] {
		return nil, false
	}
	c.seen[key] = true
	defer delete(c.seen, key)
	sc := scope{p: p, file: p.fileOf[d], funcs: []ast.Node{d}}
	ast.Inspect(d.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if r, ok := n.(*ast.ReturnStmt); ok {
			if len(r.Results) > index {
				v, dy := c.resolve(r.Results[index], sc, u)
				vals, dynamic = append(vals, v...), dynamic || dy
			} else {
				dynamic = true // named results or a call's results
			}
		}
		return true
	})
	return vals, dynamic
}

func (c *collector) pkgOf(d *ast.FuncDecl) *pkg {
	for _, p := range c.pkgs {
		if _, ok := p.fileOf[d]; ok {
			return p
		}
	}
	return nil
}

func funcBody(n ast.Node) *ast.BlockStmt {
	switch n := n.(type) {
	case *ast.FuncDecl:
		return n.Body
	case *ast.FuncLit:
		return n.Body
	}
	return nil
}

func funcType(n ast.Node) *ast.FuncType {
	switch n := n.(type) {
	case *ast.FuncDecl:
		return n.Type
	case *ast.FuncLit:
		return n.Type
	}
	return nil
}

// paramOf says whether name is a parameter of an enclosing function, and
// which: the innermost function declaring it.
func (c *collector) paramOf(name string, sc scope) (paramSink, bool) {
	for i := len(sc.funcs) - 1; i >= 0; i-- {
		ft := funcType(sc.funcs[i])
		idx := 0
		for _, field := range ft.Params.List {
			names := field.Names
			if len(names) == 0 {
				idx++
				continue
			}
			for _, n := range names {
				if n.Name == name {
					ps := paramSink{p: sc.p, index: idx}
					switch f := sc.funcs[i].(type) {
					case *ast.FuncDecl:
						ps.name, ps.decl = f.Name.Name, f
					case *ast.FuncLit:
						ps.name = closureName(sc.funcs[0], f)
						ps.outer = sc.funcs[0]
					}
					return ps, true
				}
				idx++
			}
		}
	}
	return paramSink{}, false
}

// closureName is the local name lit is assigned to in outer ("" if none:
// a callback whose arguments someone else passes).
func closureName(outer ast.Node, lit *ast.FuncLit) string {
	name := ""
	ast.Inspect(funcBody(outer), func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok && len(a.Lhs) == len(a.Rhs) {
			for i, r := range a.Rhs {
				if r == lit {
					if id, ok := a.Lhs[i].(*ast.Ident); ok {
						name = id.Name
					}
				}
			}
		}
		return name == ""
	})
	return name
}

func (c *collector) queue(ps paramSink) {
	if ps.name == "" {
		c.out.Dynamic = append(c.out.Dynamic, ps.site)
		return
	}
	key := fmt.Sprintf("%s %s %p %d %s", ps.p.path, ps.name, ps.outer, ps.index, ps.kind)
	if c.queued[key] {
		return
	}
	c.queued[key] = true
	c.work = append(c.work, ps)
}

// followParam resolves the argument every call of the sink's function
// passes at the sink's index.
func (c *collector) followParam(ps paramSink) {
	visit := func(p *pkg, f *ast.File, root ast.Node, match func(call *ast.CallExpr, sc scope) bool) {
		walkScopedFrom(p, f, root, func(n ast.Node, sc scope) {
			call, ok := n.(*ast.CallExpr)
			if !ok || !match(call, sc) || ps.index >= len(call.Args) {
				return
			}
			c.sink(call.Args[ps.index], sc, ps.kind)
		})
	}
	if ps.outer != nil { // a closure: calls by its name in the same function
		d, _ := ps.outer.(*ast.FuncDecl)
		if d == nil {
			return
		}
		visit(ps.p, ps.p.fileOf[d], d, func(call *ast.CallExpr, _ scope) bool {
			id, ok := call.Fun.(*ast.Ident)
			return ok && id.Name == ps.name
		})
		return
	}
	method := ps.decl != nil && ps.decl.Recv != nil
	for _, ip := range c.sortedPkgs() {
		p := c.pkgs[ip]
		if p != ps.p && !ast.IsExported(ps.name) {
			continue
		}
		for _, f := range p.files {
			visit(p, f, f, func(call *ast.CallExpr, sc scope) bool {
				switch fn := call.Fun.(type) {
				case *ast.Ident:
					return !method && p == ps.p && fn.Name == ps.name
				case *ast.SelectorExpr:
					if fn.Sel.Name != ps.name {
						return false
					}
					if x, ok := fn.X.(*ast.Ident); ok {
						if ip, ok := importPath(sc.file, x.Name); ok {
							return !method && ip == ps.p.path
						}
					}
					return method && p == ps.p
				}
				return false
			})
		}
	}
}

// walkFile finds the places a reason is emitted.
func (c *collector) walkFile(p *pkg, f *ast.File) {
	walkScoped(p, f, func(n ast.Node, sc scope) {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if !strings.HasSuffix(typeName(n.Type), "Condition") {
				return
			}
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
						c.sink(kv.Value, sc, KindCondition)
					}
				}
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				s, ok := l.(*ast.SelectorExpr)
				if !ok || s.Sel.Name != "Reason" {
					continue
				}
				if len(n.Rhs) == len(n.Lhs) {
					c.sink(n.Rhs[i], sc, KindCondition)
				} else if len(n.Rhs) == 1 {
					c.sink(&multiValue{call: n.Rhs[0], index: i, BadExpr: ast.BadExpr{From: n.Rhs[0].Pos(), To: n.Rhs[0].End()}}, sc, KindCondition)
				}
			}
		case *ast.CallExpr:
			s, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return
			}
			switch s.Sel.Name {
			case "Event", "Eventf", "AnnotatedEventf":
			default:
				return
			}
			i := eventReasonIndex(n, s.Sel.Name, sc, c)
			if i < 0 {
				c.out.Unclassified = append(c.out.Unclassified, c.pos(n.Pos()))
				return
			}
			c.sink(n.Args[i], sc, KindEvent)
		}
	})
}

// eventReasonIndex is the index of the reason argument of an event
// recorder call: record.EventRecorder's Event/Eventf(object, type,
// reason, ...), AnnotatedEventf(object, annotations, type, reason, ...),
// or events.EventRecorder's Eventf(regarding, related, type, reason,
// action, note, ...). -1 when the call's shape is not one of those.
func eventReasonIndex(call *ast.CallExpr, name string, sc scope, c *collector) int {
	isType := func(i int) bool { return i < len(call.Args) && c.isEventType(call.Args[i], sc) }
	switch {
	case name == "AnnotatedEventf" && isType(2):
		return 3
	case isType(1) && len(call.Args) >= 4:
		return 2
	case isType(2) && len(call.Args) >= 5:
		return 3
	}
	return -1
}

// isEventType: e is corev1.EventTypeNormal/Warning, or a local variable
// or parameter only ever set to those.
func (c *collector) isEventType(e ast.Expr, sc scope) bool {
	switch e := unparen(e).(type) {
	case *ast.SelectorExpr:
		return strings.HasPrefix(e.Sel.Name, "EventType")
	case *ast.Ident:
		if len(sc.funcs) == 0 {
			return false
		}
		if _, ok := c.paramOf(e.Name, sc); ok {
			return strings.Contains(strings.ToLower(e.Name), "type") || e.Name == "kind"
		}
		rhss := c.assignments(e.Name, sc)
		for _, r := range rhss {
			if !c.isEventType(r, sc) {
				return false
			}
		}
		return len(rhss) > 0
	}
	return false
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

func importPath(f *ast.File, name string) (string, bool) {
	if f == nil {
		return "", false
	}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		local := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		if local == name {
			return p, true
		}
	}
	return "", false
}

// walkScoped visits every node of f with its scope.
func walkScoped(p *pkg, f *ast.File, visit func(ast.Node, scope)) {
	walkScopedFrom(p, f, f, visit)
}

func walkScopedFrom(p *pkg, f *ast.File, root ast.Node, visit func(ast.Node, scope)) {
	var stack []ast.Node
	var funcs []ast.Node
	ast.Inspect(root, func(n ast.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if len(funcs) > 0 && funcs[len(funcs)-1] == top {
				funcs = funcs[:len(funcs)-1]
			}
			return true
		}
		stack = append(stack, n)
		switch n.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			funcs = append(funcs, n)
		}
		visit(n, scope{p: p, file: f, funcs: append([]ast.Node(nil), funcs...)})
		return true
	})
}
