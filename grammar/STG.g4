// STG.g4 - Grammar of the STG language (symbolic tensor graphs).
//
// One combined grammar for the whole language of docs/language.md. The C++
// lexer and parser are generated from it at build time (no listener, no
// visitor: lib/Parse walks the tree through the context accessors), so the
// generated code stays two translation units. Semantics (names, axes versus
// dims in `X/a`, attribute meaning) are decided in lib/Parse, not here, so
// that errors about them can name what was found.
grammar STG;

file : topStmt* EOF ;

topStmt
  : importDecl
  | dimDecl
  | axisDecl
  | optionDecl
  | setDecl
  | blockDecl
  | modelDecl
  ;

importDecl : 'import' STRING ';' ;

dimDecl    : 'dim' dimItem (',' dimItem)* ';' ;
dimItem    : ID ('=' expr)? ;

axisDecl   : 'axis' axisItem (',' axisItem)* ';' ;
axisItem   : name=ID ('=' alias=ID ('if' neg='!'? cond=ID)?)? ;

optionDecl : 'option' optionItem (',' optionItem)* ';' ;
optionItem : ID '=' literal ;

setDecl    : 'set' setItem (',' setItem)* ';' ;
setItem    : ID '=' (literal | expr) ;

literal    : 'true' | 'false' | STRING | INT | FLOAT ;

// `override block` replaces a block declared before it (in an import), for
// every caller. Attribute parameters in brackets are given at the call as
// an op's attributes are: `block attn[mask = "causal", window = 0](...)`.
blockDecl  : over='override'? 'block' ID
             ('[' (blockAttrParam (',' blockAttrParam)*)? ']')?
             '(' (blockParam (',' blockParam)*)? ')' ('->' type)? body ;
blockParam : ID ':' type ;
// A kind (`bool`, `string`, `expr`), a default, or both; no default: the
// call must give it.
blockAttrParam : name=ID (':' kind=ID)? ('=' attrValue)? ;

modelDecl  : 'model' ID body ;

body : '{' stmt* '}' ;

stmt
  : 'param' declItem (',' declItem)* ';'                 # paramStmt
  | 'state' declItem (',' declItem)* ';'                 # stateStmt
  | target (',' target)* '=' value ';'                   # assignStmt
  | 'repeat' expr ('as' ID)? body                        # repeatStmt
  | 'if' indexCond body ('else' 'if' indexCond body)* ('else' body)?
                                                         # ifStmt
  | 'return' value ';'                                   # returnStmt
  ;

declItem : ID ':' type ;

// A condition on a repeat's index (`layer % 6 == 5`), so a repeat can run
// a pattern of layers, or on a block's boolean attribute parameter
// (`if rope`), decided where the block is inlined. Earlier alternatives
// bind tighter.
indexCond
  : '(' indexCond ')'                                        # parenCond
  | '!' indexCond                                            # notCond
  | indexCond '&&' indexCond                                 # andCond
  | indexCond '||' indexCond                                 # orCond
  | ID ('%' modulus=INT)? op=('==' | '!=' | '<' | '<=' | '>' | '>=')
    rhs=INT                                                  # compareCond
  | ID                                                       # flagCond
  ;

target   : ID (':' type)? ;

// A value is a name or an op/block call; calls nest.
value
  : ID '[' attrList? ']' '(' (value (',' value)*)? ')'  # callAttrValue
  | ID '(' (value (',' value)*)? ')'                     # callValue
  | ID                                                   # nameValue
  ;

attrList
  : einsumSpec
  | attr (',' attr)*
  ;

// `bsd,df->bsf`; an operand or the result may have no index (a scalar).
einsumSpec : anyName? (',' anyName?)* '->' anyName? ;

attr      : (anyName '=')? attrValue ;

// Inside brackets keywords are plain names: `softmax[dim=1]`,
// `einsum[as,sd->ad]`.
anyName
  : ID | 'import' | 'dim' | 'axis' | 'if' | 'option' | 'set' | 'true'
  | 'false' | 'block' | 'model' | 'param' | 'state' | 'repeat' | 'as'
  | 'return' | 'override' | 'else'
  ;
attrValue
  : STRING                                   # stringAttr
  | ('true' | 'false')                       # boolAttr
  | '(' attrValue (',' attrValue)+ ')'       # tupleAttr
  | expr                                     # exprAttr
  ;

// A tensor type: optional element type, logical shape, optional PartialSum axes.
type     : elem=ID? '[' (expr (',' expr)*)? ']' ('@' axisSet)? ;
axisSet  : ID | '(' ID (',' ID)* ')' ;

// Symbolic arithmetic over dims, axis degrees and options.
expr
  : '(' expr ')'                              # parenExpr
  | '-' expr                                  # negExpr
  | <assoc=right> expr '^' expr               # powExpr
  | expr op=('*' | '/') expr                  # mulExpr
  | expr op=('+' | '-') expr                  # addExpr
  | ID '(' expr (',' expr)* ')'               # callExpr
  | ID                                        # symExpr
  | INT                                       # intExpr
  | FLOAT                                     # floatExpr
  ;

ID      : [a-zA-Z_] [a-zA-Z_0-9]* ;
INT     : [0-9]+ ;
FLOAT   : [0-9]+ '.' [0-9]* ([eE] [+-]? [0-9]+)? | [0-9]+ [eE] [+-]? [0-9]+ ;
STRING  : '"' (~["\\\r\n] | '\\' .)* '"' ;

LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS            : [ \t\r\n]+ -> skip ;
// Anything else is a token the parser reports, with its location.
ERROR_CHAR    : . ;
