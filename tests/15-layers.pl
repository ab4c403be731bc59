#!/usr/bin/env perl
# 15-layers: the runtime's floors. Reads the map in runtime/README.md (the one place the allowed
# order is written) and checks, from `nm` over the library's objects (build/obj/<layer>/*.o),
# that every call and data reference between runtime files goes down the map or stays in its
# floor, that no runtime files call each other in a circle, that each file includes only its own
# floor's header or those of floors it may call, that object names are unique (ar keeps one
# member per name) and that no folder lists more than 8 files. The checker is first run on a
# made-up upward call and a made-up circle, which it must report.
use strict;
use warnings;

my $B = $ENV{BC_BUILD} // 'build';
my ($n, $failed) = (0, 0);
sub ok { my ($c, $name, @diag) = @_; $n++; print(($c ? "ok" : "not ok") . " $n - $name\n");
         unless ($c) { $failed = 1; print "# $_\n" for @diag } }

# ---- the map ------------------------------------------------------------------------------------
# In runtime/README.md, a ```layers block, one floor a line, top first:
#   name/  what it holds  -> the floors it may call (nothing after the arrow: none)
sub read_map {
  my ($path) = @_;
  open(my $fh, '<', $path) or return (undef, "cannot open $path: $!");
  my ($in, @order, %may) = (0);
  while (<$fh>) {
    if (/^```layers\s*$/) { $in = 1; next }
    last if $in && /^```/;
    next unless $in && /\S/;
    /^\s*(\w+)\/\s.*->\s*(.*?)\s*$/ or return (undef, "$path: cannot read map line '$_' (expected 'name/  text  -> floors')");
    my ($name, $list) = ($1, $2);
    push @order, $name;
    $may{$name} = {};
    $may{$name}{ s{/$}{}r } = 1 for split ' ', $list;
  }
  return (undef, "$path has no ```layers block") unless @order;
  # the map itself must go only downward: a floor may call only floors listed below it
  for my $i (0 .. $#order) {
    my %below = map { $_ => 1 } @order[$i + 1 .. $#order];
    for my $t (sort keys %{ $may{$order[$i]} }) {
      return (undef, "$path: floor '$order[$i]' may call '$t', which is not listed below it") unless $below{$t};
    }
  }
  return (\%may, undef, \@order);
}

# ---- the checker --------------------------------------------------------------------------------
# edges: [from file, from layer, symbol, to file, to layer]; layer 'top' (the CLI) may use any.
sub layer_problems {
  my ($may, $edges) = @_;
  my @bad;
  for my $e (@$edges) {
    my ($ff, $fl, $sym, $tf, $tl) = @$e;
    next if $fl eq $tl || $fl eq 'top';
    next if $may->{$fl}{$tl};
    my $allowed = join(' ', sort keys %{ $may->{$fl} }) || 'nothing';
    push @bad, "$ff ($fl/) uses $sym from $tf ($tl/): $fl/ may use only its own floor and: $allowed";
  }
  return @bad;
}

# the circles among files (strongly connected components of more than one file), each as a list
sub circles {
  my ($edges) = @_;
  my %adj;
  for my $e (@$edges) { $adj{$e->[0]}{$e->[3]} = 1 if $e->[0] ne $e->[3]; $adj{$e->[3]} //= {} }
  my ($idx, %index, %low, %on, @stack, @out) = (0);
  my $visit;
  $visit = sub {
    my ($v) = @_;
    $index{$v} = $low{$v} = $idx++;
    push @stack, $v; $on{$v} = 1;
    for my $w (sort keys %{ $adj{$v} }) {
      if (!defined $index{$w}) { $visit->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v} }
      elsif ($on{$w} && $index{$w} < $low{$v}) { $low{$v} = $index{$w} }
    }
    if ($low{$v} == $index{$v}) {
      my @c;
      while (1) { my $w = pop @stack; $on{$w} = 0; push @c, $w; last if $w eq $v }
      push @out, [ sort @c ] if @c > 1;
    }
  };
  for my $v (sort keys %adj) { $visit->($v) unless defined $index{$v} }
  return @out;
}

# ---- the checker can fail -----------------------------------------------------------------------
{
  my %may = (top => {}, mid => { low => 1 }, low => {});
  my @up = ([ 'low/a.o', 'low', 'bci_mid_fn', 'mid/b.o', 'mid' ], [ 'mid/b.o', 'mid', 'bci_low_fn', 'low/a.o', 'low' ]);
  my @p = layer_problems(\%may, \@up);
  ok(@p == 1 && $p[0] =~ /low\/a\.o \(low\/\) uses bci_mid_fn from mid\/b\.o \(mid\/\)/,
     'the checker reports a made-up upward call', @p);
  my @c = circles(\@up);
  ok(@c == 1 && "@{ $c[0] }" eq 'low/a.o mid/b.o', 'the checker reports a made-up circle of two files');
  my @d = circles([ [ 'mid/b.o', 'mid', 'x', 'low/a.o', 'low' ] ]);
  ok(!@d, 'a call downward is no circle');
}

# ---- the real runtime ---------------------------------------------------------------------------
my ($may, $err, $order) = read_map('runtime/README.md');
ok(defined $may, 'runtime/README.md has a map whose floors call only floors below them', $err // ());
exit 1 unless defined $may;
$may->{top} = {};

my @floors = grep { -d "runtime/$_" && $_ ne 'include' && $_ ne 'python' } map { s{.*/}{}r } glob('runtime/*');
my %in_map = map { $_ => 1 } @$order;
ok(!(grep { !$in_map{$_} } @floors) && !(grep { !-d "runtime/$_" } @$order),
   'every folder of runtime/ is a floor of the map and every floor a folder',
   'folders: ' . join(' ', sort @floors), 'map: ' . join(' ', @$order));

# objects: build/obj/<floor>/*.o, and the CLI (build/obj/cli.o, tune.o, cli_util.o) on top of everything
my %layer_of;
for my $f (@$order) {
  for my $o (glob("$B/obj/$f/*.o")) {  # an object whose source is gone is a leftover: skip it
    my ($name) = $o =~ m{([^/]+)\.o$};
    $layer_of{$o} = $f if -f "runtime/$f/$name.c" || ($f eq 'jit' && $name =~ /^(embed|aot|aot_empty)$/);
  }
}
# the command-line tool: runtime/*.c (cli.c, tune.c, cli_util.c)
for my $o (glob("$B/obj/*.o")) {
  my ($name) = $o =~ m{([^/]+)\.o$};
  $layer_of{$o} = 'top' if -f "runtime/$name.c";
}
my @missing = grep { my @o = glob("$B/obj/$_/*.o"); !@o } @$order;
ok(!@missing, "every floor has objects under $B/obj (built by ./build.sh)", "none for: @missing");

my (%def, %uses);
for my $o (sort keys %layer_of) {
  my @nm = `nm -P "$o" 2>&1`;
  if ($?) { ok(0, "nm $o", @nm); next }
  for (@nm) {
    my ($sym, $type) = split ' ';
    next unless defined $type && $sym =~ /^bci?_/;
    if ($type eq 'U') { push @{ $uses{$o} }, $sym }
    elsif ($type =~ /^[TDBRCVW]$/) { $def{$sym} = $o }
  }
}
ok(scalar(keys %def) > 50 && ($def{bci_fail} // '') eq "$B/obj/base/bc_error.o", 'nm found the runtime\'s definitions (bci_fail in base/bc_error.o)',
   'found ' . scalar(keys %def) . ', bci_fail in ' . ($def{bci_fail} // 'none'));
my @edges;
for my $o (sort keys %uses) {
  for my $sym (@{ $uses{$o} }) {
    my $t = $def{$sym} or next; # defined outside our objects
    (my $fs = $o) =~ s{^\Q$B\E/obj/}{};
    (my $ts = $t) =~ s{^\Q$B\E/obj/}{};
    push @edges, [ $fs, $layer_of{$o}, $sym, $ts, $layer_of{$t} ];
  }
}
ok(@edges > 50, 'nm found the calls between files', 'found ' . scalar(@edges));
my @bad = layer_problems($may, \@edges);
ok(!@bad, 'every call between floors goes down the map', @bad);
my @circ = circles(\@edges);
ok(!@circ, 'no runtime files call each other in a circle', map { 'circle: ' . join(' -> ', @$_) } @circ);

# includes: "blockcast.h", or "<floor>/bc_<floor>.h" of the file's own floor or one it may call
my @inc_bad;
for my $f (@$order) {
  for my $src (sort glob("runtime/$f/*.c"), glob("runtime/$f/*.h")) {
    open(my $fh, '<', $src) or next;
    while (<$fh>) {
      next unless /^\s*#\s*include\s+"([^"]+)"/;
      my $h = $1;
      next if $h eq 'blockcast.h';
      my ($hf) = $h =~ m{^(\w+)/bc_\1\.h$};
      push @inc_bad, "$src:$.: includes \"$h\": expected \"$f/bc_$f.h\" or the header of a floor $f/ may call ("
                     . (join(' ', sort keys %{ $may->{$f} }) || 'none') . ')'
        unless defined $hf && ($hf eq $f || $may->{$f}{$hf});
    }
  }
}
ok(!@inc_bad, 'each runtime file includes only its floor\'s header or those of floors below it', @inc_bad);

my %base;
my @dup;
for my $o (sort keys %layer_of) { (my $b = $o) =~ s{.*/}{}; push @dup, "$o and $base{$b}" if $base{$b}; $base{$b} //= $o }
ok(!@dup, 'object file names are unique (ar keeps one member per name)', @dup);

my @crowded;
for my $d ('runtime', map { "runtime/$_" } @$order) {
  my @files = grep { -f } glob("$d/*");
  push @crowded, "$d has " . scalar(@files) . " files" if @files > 8;
}
ok(!@crowded, 'no runtime folder lists more than 8 files', @crowded);

print "1..$n\n";
exit $failed;
