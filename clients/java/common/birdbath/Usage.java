package birdbath;

import java.io.File;
import java.net.MalformedURLException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.function.Function;

/**
 * The command line of an example program, checked before anything is sent: a wrong one ends the program with
 * its usage line on stderr and exit status 2, as a command-line tool does, rather than with an
 * ArrayIndexOutOfBoundsException or a NumberFormatException. {@code -h} or {@code --help} prints the usage line
 * and exits 0.
 */
public final class Usage {
    private final String line;
    private final String[] args;

    /** {@code line}: the program's name and its arguments; between {@code least} and {@code most} of them. */
    public Usage(String line, String[] args, int least, int most) {
        this.line = line;
        this.args = args;
        if (args.length > 0 && (args[0].equals("-h") || args[0].equals("--help"))) {
            System.out.println("usage: " + line);
            System.exit(0);
        }
        if (args.length < least) {
            fail("too few arguments");
        }
        if (args.length > most) {
            fail("too many arguments");
        }
    }

    /** The argument at {@code index}, or {@code null} when the command line stops before it. */
    public String word(int index) {
        return index < args.length ? args[index] : null;
    }

    /** The gateway's address: an http or https URL. */
    public String url(int index) {
        String text = args[index];
        try {
            URI uri = new URI(text);
            if (("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) && uri.getHost() != null) {
                uri.toURL();
                return text;
            }
        } catch (URISyntaxException | MalformedURLException | IllegalArgumentException e) {
            // the message below says what was expected
        }
        return fail("URL must be the gateway's http:// or https:// address, not '" + text + "'");
    }

    /** A whole number, named {@code what} in the message when it is not one. */
    public int number(int index, String what) {
        return parsed(index, what + " must be a whole number", Integer::parseInt);
    }

    /** The argument made into a value by {@code parse}; {@code rule} and the argument are the message if it throws. */
    public <T> T parsed(int index, String rule, Function<String, T> parse) {
        try {
            return parse.apply(args[index]);
        } catch (IllegalArgumentException e) {
            return fail(rule + ", not '" + args[index] + "'");
        }
    }

    /**
     * QueryPool's command line (the same for both stacks): a KIND and at most a constraint, or advertise with a
     * TYPE and a NAME.
     */
    public static Usage ofQueryPool(String[] args) {
        Usage usage = new Usage("QueryPool URL startd|schedd|master|submittor|license|storage|any [CONSTRAINT]"
                + " | QueryPool URL advertise TYPE NAME", args, 2, 4);
        String kind = usage.oneOf(1, "KIND", "startd", "schedd", "master", "submittor", "license", "storage", "any",
                "advertise");
        if (kind.equals("advertise") != (args.length == 4)) {
            usage.fail(kind.equals("advertise") ? "advertise takes a TYPE and a NAME" : "too many arguments");
        }
        return usage;
    }

    /** One of {@code choices}, named {@code what} in the message when it is none of them. */
    public String oneOf(int index, String what, String... choices) {
        for (String choice : choices) {
            if (choice.equals(args[index])) {
                return choice;
            }
        }
        return fail(what + " must be one of " + String.join(", ", choices) + ", not '" + args[index] + "'");
    }

    /** A file that is there, named {@code what} in the message when it is not (what it holds is read later). */
    public File existing(int index, String what) {
        File file = new File(args[index]);
        return file.exists() ? file : fail(what + " '" + args[index] + "' does not exist");
    }

    /** End the program: the problem, then the usage line, on stderr; exit status 2. */
    public <T> T fail(String problem) {
        String program = line.split(" ", 2)[0];
        System.err.println(program + ": " + problem);
        System.err.println("usage: " + line);
        System.exit(2);
        return null;
    }
}
