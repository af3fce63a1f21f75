//! The abstract syntax tree of a P4-16 program (the v1model subset tern compiles).

use crate::diag::Pos;

/// An annotation `@name(args)`: its name and the raw argument tokens' values.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    pub name: String,
    pub args: Vec<Expr>,
    pub pos: Pos,
}

/// A type as written.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeRef {
    Bit(Box<Expr>),
    Int(Box<Expr>),
    Varbit(Box<Expr>),
    Bool,
    Error,
    Str,
    Void,
    /// `_` (don't care) or a type without declared width (`int`).
    InfInt,
    Named(String, Vec<TypeRef>, Pos),
    Stack(Box<TypeRef>, Box<Expr>),
    Tuple(Vec<TypeRef>),
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

/// Expression forms.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(u128, Option<(u32, bool)>),
    Bool(bool),
    Str(String),
    Name(String),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Vec<TypeRef>, Vec<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(TypeRef, Box<Expr>),
    List(Vec<Expr>),
    /// A struct/header initializer with field names: `{ a = 1, b = 2 }`.
    NamedList(Vec<(String, Expr)>),
    /// `a &&& b`
    Mask(Box<Expr>, Box<Expr>),
    /// `a .. b`
    Range(Box<Expr>, Box<Expr>),
    /// `default` or `_` in a keyset.
    Default,
    /// A type used where an expression stands (e.g. `bit<8>` argument), rarely needed.
    Type(TypeRef),
}

/// A parameter of a parser, control, action or function.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub annotations: Vec<Annotation>,
    pub dir: Option<&'static str>,
    pub ty: TypeRef,
    pub name: String,
    pub default: Option<Expr>,
    pub pos: Pos,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub pos: Pos,
}

/// Statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Assign(Expr, Expr),
    Call(Expr),
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    /// `switch (e) { labels: block }`; a case with `None` body falls through.
    Switch(Expr, Vec<SwitchCase>),
    Block(Vec<Stmt>),
    Var(Decl),
    Exit,
    Return(Option<Expr>),
    Empty,
    /// `for (init; cond; update) body` (a `for (x in a .. b)` loop is desugared into this).
    For {
        init: Vec<Stmt>,
        cond: Option<Expr>,
        update: Vec<Stmt>,
        body: Box<Stmt>,
    },
    Break,
    Continue,
}

/// One `switch` case.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchCase {
    /// `None` = `default`.
    pub label: Option<Expr>,
    pub body: Option<Vec<Stmt>>,
    pub pos: Pos,
}

/// A table property.
#[derive(Clone, Debug, PartialEq)]
pub enum TableProp {
    Key(Vec<KeyElement>),
    Actions(Vec<(Vec<Annotation>, Expr)>),
    Entries {
        is_const: bool,
        entries: Vec<TableEntry>,
    },
    Value {
        name: String,
        is_const: bool,
        value: Expr,
    },
}

/// `expr : match_kind;`
#[derive(Clone, Debug, PartialEq)]
pub struct KeyElement {
    pub expr: Expr,
    pub kind: String,
    pub annotations: Vec<Annotation>,
    pub pos: Pos,
}

/// A const entry `keyset : action(args);`.
#[derive(Clone, Debug, PartialEq)]
pub struct TableEntry {
    pub annotations: Vec<Annotation>,
    pub priority: Option<Expr>,
    pub keys: Vec<Expr>,
    pub action: Expr,
    pub pos: Pos,
}

/// A parser state.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub annotations: Vec<Annotation>,
    pub name: String,
    pub body: Vec<Stmt>,
    pub transition: Option<Transition>,
    pub pos: Pos,
}

/// A state transition.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    Direct(String, Pos),
    Select(Vec<Expr>, Vec<(Expr, String, Pos)>),
}

/// A declaration (top level or local).
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub annotations: Vec<Annotation>,
    pub kind: DeclKind,
    pub pos: Pos,
}

/// Declaration forms.
#[derive(Clone, Debug, PartialEq)]
pub enum DeclKind {
    Header {
        name: String,
        fields: Vec<Field>,
    },
    HeaderUnion {
        name: String,
        fields: Vec<Field>,
    },
    Struct {
        name: String,
        fields: Vec<Field>,
    },
    Typedef {
        name: String,
        ty: TypeRef,
    },
    Enum {
        name: String,
        underlying: Option<TypeRef>,
        members: Vec<(String, Option<Expr>, Pos)>,
    },
    Error(Vec<String>),
    MatchKind(Vec<String>),
    Const {
        ty: TypeRef,
        name: String,
        value: Expr,
    },
    Var {
        ty: TypeRef,
        name: String,
        init: Option<Expr>,
    },
    Extern {
        name: String,
        methods: Vec<String>,
    },
    ExternFunction {
        name: String,
    },
    Function {
        ret: TypeRef,
        name: String,
        params: Vec<Param>,
        body: Vec<Stmt>,
    },
    Action {
        name: String,
        params: Vec<Param>,
        body: Vec<Stmt>,
    },
    Table {
        name: String,
        props: Vec<(TableProp, Pos)>,
    },
    Parser {
        name: String,
        params: Vec<Param>,
        ctor_params: Vec<Param>,
        locals: Vec<Decl>,
        states: Vec<State>,
    },
    Control {
        name: String,
        params: Vec<Param>,
        ctor_params: Vec<Param>,
        locals: Vec<Decl>,
        apply: Vec<Stmt>,
    },
    /// Parser/control/package type declarations (no body).
    TypeDecl {
        name: String,
    },
    Instance {
        ty: TypeRef,
        args: Vec<Expr>,
        name: String,
    },
    ValueSet {
        ty: TypeRef,
        size: Expr,
        name: String,
    },
}

/// A header/struct field.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub annotations: Vec<Annotation>,
    pub ty: TypeRef,
    pub name: String,
    pub pos: Pos,
}

impl Decl {
    /// The declared name, if any.
    pub fn name(&self) -> Option<&str> {
        use DeclKind::*;
        match &self.kind {
            Header { name, .. }
            | HeaderUnion { name, .. }
            | Struct { name, .. }
            | Typedef { name, .. }
            | Enum { name, .. }
            | Const { name, .. }
            | Var { name, .. }
            | Extern { name, .. }
            | ExternFunction { name }
            | Function { name, .. }
            | Action { name, .. }
            | Table { name, .. }
            | Parser { name, .. }
            | Control { name, .. }
            | TypeDecl { name }
            | Instance { name, .. }
            | ValueSet { name, .. } => Some(name),
            Error(_) | MatchKind(_) => None,
        }
    }
}

/// Find an annotation by name.
pub fn annotation<'a>(anns: &'a [Annotation], name: &str) -> Option<&'a Annotation> {
    anns.iter().find(|a| a.name == name)
}

/// The integer argument of `@id(N)`-style annotations.
pub fn annotation_int(anns: &[Annotation], name: &str) -> Option<u128> {
    annotation(anns, name).and_then(|a| match a.args.first().map(|e| &e.kind) {
        Some(ExprKind::Int(v, _)) => Some(*v),
        _ => None,
    })
}

/// The string argument of `@name("...")`-style annotations.
pub fn annotation_str(anns: &[Annotation], name: &str) -> Option<String> {
    annotation(anns, name).and_then(|a| match a.args.first().map(|e| &e.kind) {
        Some(ExprKind::Str(s)) => Some(s.clone()),
        _ => None,
    })
}
